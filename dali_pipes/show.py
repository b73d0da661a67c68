"""``python -m dali_pipes.show``: what the model sees -- samples through the training
pipeline on every backend, a past run's step replayed, the op gallery
(:mod:`dali_pipes.tools.show`)."""

from dali_pipes.tools.show import main

if __name__ == "__main__":
    main()
