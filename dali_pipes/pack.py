"""``python -m dali_pipes.pack``: pack an image folder into indexed tar shards
(:mod:`dali_pipes.tools.pack`)."""

from dali_pipes.tools.pack import main

if __name__ == "__main__":
    main()
