"""A sparse tensor's parts: its metadata kernels (CPU's own, redispatched: they only call ops on the
jax component tensors), a new COO tensor from jax components, a compressed tensor's (row, column,
value) triples, and the errors for layouts and ops jax does not compute."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, fallback, tensor
from jaxdev.ops.kit import J
from jaxdev.ops.registry import aten, register_layout_kernel

SPARSE_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCPU)


SPARSE_CSR_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCsrCPU)


# Kernels that only read and write sparse metadata and call ops on the component tensors.
COO_METADATA = [
    aten._sparse_coo_tensor_with_dims_and_tensors.default,
    aten._sparse_coo_tensor_with_dims.default,
    aten._nnz.default,
    aten._indices.default,
    aten._values.default,
    aten.indices.default,
    aten.values.default,
    aten.sparse_dim.default,
    aten.dense_dim.default,
    aten._dimI.default,
    aten._dimV.default,
    aten.is_coalesced.default,
    aten._coalesced_.default,
    aten.clone.default,
    aten.copy_.default,
    aten.copy_sparse_to_sparse_.default,  # copy_'s SparseCPU kernel calls it: without it, an endless fallback
    aten.sparse_resize_.default,
    aten.sparse_resize_and_clear_.default,
    aten.zero_.default,
    aten.empty.memory_format,
    aten.view_as_real.default,  # a view of the values (x.real, x.imag of a sparse complex tensor go here)
    aten.view_as_complex.default,
    aten.unsqueeze.default,  # new indices (or values unsqueezed) over the same values: views, as on CPU
    aten.permute.default,  # (movedim, .T and stack reach these two)
    aten._sparse_broadcast_to.default,
    aten.cat.default,  # indices and values concatenated (and shifted, or padded with zeros along a dense dim)
]


CSR_METADATA = [  # the SparseCsr key holds CSR and CSC alike
    aten._nnz.default,
    aten.crow_indices.default,
    aten.col_indices.default,
    aten.ccol_indices.default,
    aten.row_indices.default,
    aten.values.default,
    aten.sparse_dim.default,
    aten.dense_dim.default,
    aten.clone.default,
    aten.copy_.default,
    aten.empty.memory_format,
]


SUPPORTED = (
    "creation, to_dense, coalesce, indices/values, t/transpose/permute/unsqueeze, cat, and products with dense tensors"
)


def redispatch(op, keys):
    handle = op._handle

    def kernel(*args, **kwargs):
        return handle.redispatch_boxed(keys, *args, **kwargs)

    return kernel


def unsupported_layout(layout) -> dtypes.UnsupportedLayoutError:
    name = str(layout).removeprefix("torch.")
    return dtypes.UnsupportedLayoutError(
        f"layout {name} is not supported on jax: jax holds strided, sparse_coo, sparse_csr and sparse_csc tensors; "
        "keep this tensor on cpu"
    )


_make_coo_kernel = redispatch(aten._sparse_coo_tensor_with_dims_and_tensors.default, SPARSE_CPU)


def make_coo(like, sparse_dim, dense_dim, shape, indices, values, *, coalesced):
    """A new jax COO tensor from jax component tensors (PyTorch's own constructor, SparseCPU's kernel)."""
    return _make_coo_kernel(
        sparse_dim,
        dense_dim,
        list(shape),
        indices,
        values,
        dtype=like.dtype,
        layout=torch.sparse_coo,
        device=tensor.DEVICE,
        is_coalesced=coalesced,
    )


def csr_rows(crow: jax.Array, nnz: int) -> jax.Array:
    """The row of each stored element of a CSR tensor (crow_indices expanded)."""
    rows = crow.shape[0] - 1
    return jnp.repeat(jnp.arange(rows, dtype=crow.dtype), jnp.diff(crow), total_repeat_length=nnz)


def compressed_parts(sparse):
    """(row, column, value) of each stored element of a 2-D CSR or CSC tensor."""
    if sparse.dim() != 2 or sparse.dense_dim() != 0:
        raise unsupported_layout(f"{sparse.layout} with batch or dense dimensions")
    if sparse.layout not in (torch.sparse_csr, torch.sparse_csc):
        raise unsupported_layout(sparse.layout)
    values = J(sparse.values())
    if sparse.layout == torch.sparse_csr:
        return csr_rows(J(sparse.crow_indices()), values.shape[0]), J(sparse.col_indices()), values
    return J(sparse.row_indices()), csr_rows(J(sparse.ccol_indices()), values.shape[0]), values


def needs_cpu(op, layout):
    return fallback.FallbackError(
        f"{op.name()} has no jax kernel for {str(layout).removeprefix('torch.')} tensors "
        f"(jax computes {SUPPORTED}), and JAXDEV_FALLBACK=error forbids running it on CPU"
    )


for _op in COO_METADATA:
    register_layout_kernel(_op, redispatch(_op, SPARSE_CPU), "SparsePrivateUse1")
for _op in CSR_METADATA:
    register_layout_kernel(_op, redispatch(_op, SPARSE_CSR_CPU), "SparseCsrPrivateUse1")
