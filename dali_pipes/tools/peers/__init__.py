"""The loaders a user would pick instead of dali_pipes (SPDL, DALI's dynamic mode, FFCV),
each written the way its own documentation writes an image-classification loader, so
``bench`` can measure them beside dali_pipes on the same files and the same work.

They are yardsticks, not loaders of this package: their packages are the optional extra
``peers`` and are imported only when a peer is built (:mod:`.task` says what each must do).
"""
