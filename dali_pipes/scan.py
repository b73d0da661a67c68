"""``python -m dali_pipes.scan``: find the files a run cannot decode
(:mod:`dali_pipes.tools.scan`)."""

from dali_pipes.tools.scan import main

if __name__ == "__main__":
    main()
