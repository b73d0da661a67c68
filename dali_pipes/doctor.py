"""``python -m dali_pipes.doctor``: is the training input-bound, and what to change
(:mod:`dali_pipes.tools.doctor`)."""

from dali_pipes.tools.doctor import main

if __name__ == "__main__":
    main()
