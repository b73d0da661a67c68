"""The augmentation ops, one module each (crops, per-sample ops, batch ops)."""
