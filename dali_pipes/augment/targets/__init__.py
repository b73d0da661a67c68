"""Detection and segmentation targets (boxes with their labels, instance masks, semantic
masks) moved with their image by the same drawn geometry as the image.

Boxes are a few numbers per object, so they are moved once in NumPy, on the host, from the
geometry every backend realises (:mod:`.boxes`): each backend gets the same boxes, as it
gets the same crop windows. Masks are images and are resampled by each backend, nearest
neighbour, from the same geometry (:mod:`.masks_torch` is the torch realisation).
"""
