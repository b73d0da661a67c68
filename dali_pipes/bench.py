"""``python -m dali_pipes.bench``: every loader side by side (:mod:`dali_pipes.tools.bench`)."""

from dali_pipes.tools.bench import main

if __name__ == "__main__":
    main()
