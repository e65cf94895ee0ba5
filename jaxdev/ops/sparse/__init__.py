"""Sparse COO and CSR tensors on `jax`: PyTorch's own sparse tensors whose indices and values are jax tensors.

PyTorch builds a sparse tensor for any backend device (`new_sparse` gives a PrivateUse1 device the
SparsePrivateUse1 key; compressed layouts get SparseCsrPrivateUse1), and its CPU kernels for sparse
*metadata* (creation from indices and values, `_nnz`, `_indices`, `crow_indices`, `clone`, `copy_`, ...)
only call other ops on the component tensors. So those run as they are, redispatched to SparseCPU /
SparseCsrCPU, and their components stay jax tensors. The kernels that compute on the values
(`to_dense`, `coalesce`, dense -> sparse, sparse x dense products) are written in JAX (conversions, products). Any other
sparse op runs on CPU through the CPU fallback's policy (JAXDEV_FALLBACK: counted, warned, or refused),
never reaching a dispatcher error. Layouts jaxdev does not hold (CSC, BSR, BSC) raise UnsupportedLayoutError.

By concern: components (metadata kernels and parts), conversions, products, on_cpu (the fallback).
Importing the package registers them all.
"""

from jaxdev.ops.sparse import components, conversions, on_cpu, products  # noqa: F401
