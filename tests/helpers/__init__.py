"""Code the tests share: trees of test images, packing, one-line errors."""
