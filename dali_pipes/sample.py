"""``python -m dali_pipes.sample DIR``: the sample dataset as an image folder
(:mod:`dali_pipes.tools.sample`)."""

from dali_pipes.tools.sample import main

if __name__ == "__main__":
    main()
