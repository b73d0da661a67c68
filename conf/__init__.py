"""Hydra configuration groups; installed as the package ``dali_pipes.conf``."""
