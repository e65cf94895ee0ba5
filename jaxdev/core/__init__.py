"""The jax tensor's core: strided storage (see jaxdev/tensor.py, its public surface, for the model).

boxes.py (storages and their lifetime), strided.py (reading and writing through strides), plans.py
(views as slices of a flat storage), placement.py (devices, meshes), limits.py (what PyTorch refuses)."""
