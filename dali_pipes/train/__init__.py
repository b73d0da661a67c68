"""The training app: the run, its loop, recipe, optimizers, checkpoints, metrics and models."""
