"""Images: decoding, header checks, the compiled resize and its numba cache."""
