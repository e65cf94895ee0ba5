"""Layout conversions computed in JAX: sparse -> dense (to_dense), coalesce, dense -> COO, CSR and CSC,
and COO <-> compressed. BSR and BSC are refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J
from jaxdev.ops.registry import aten, register, register_layout_kernel
from jaxdev.ops.sparse.components import compressed_parts, make_coo, unsupported_layout


def _scatter_dense(shape, linear_index_parts, values, jdt):
    """Dense array of `shape` with `values` (nnz, *dense dims) added at the sparse positions."""
    out = jnp.zeros(shape, jdt)
    if values.shape[0] == 0 or 0 in shape:
        return out
    if not linear_index_parts:  # no sparse dims (a 0-dim tensor): the values add up in place
        return out + values.sum(0).astype(jdt)
    return out.at[tuple(linear_index_parts)].add(values.astype(jdt), mode="drop")


def _to_dense_coo(self, dtype=None, masked_grad=None):
    if dtype is not None and dtype != self.dtype:
        raise RuntimeError("dtype argument is not supported by sparse_to_dense")
    jdt = dtypes.to_jax_dtype(self.dtype)
    idx = J(self._indices())
    parts = [idx[d] for d in range(idx.shape[0])]
    return tensor.wrap(_scatter_dense(tuple(self.shape), parts, J(self._values()), jdt))


def _to_dense_csr(self, dtype=None, masked_grad=None):
    if dtype is not None and dtype != self.dtype:
        raise RuntimeError("dtype argument is not supported by sparse_csr_to_dense")
    rows, cols, values = compressed_parts(self)
    jdt = dtypes.to_jax_dtype(self.dtype)
    return tensor.wrap(_scatter_dense(tuple(self.shape), [rows, cols], values, jdt))


def _coalesce(self):
    sparse_dim = self.sparse_dim()
    indices, values = J(self._indices()), J(self._values())
    nnz = values.shape[0]
    if nnz < 2:
        return make_coo(
            self,
            sparse_dim,
            self.dense_dim(),
            self.shape,
            self._indices().clone(),
            self._values().clone(),
            coalesced=True,
        )
    # Row-major linear position of each entry; entries with the same position are summed, in order.
    linear = jnp.zeros((nnz,), jnp.int64)
    for d in range(sparse_dim):
        linear = linear * self.shape[d] + indices[d]
    order = jnp.argsort(linear, stable=True)
    sorted_linear = linear[order]
    first = jnp.concatenate([jnp.ones((1,), bool), sorted_linear[1:] != sorted_linear[:-1]])
    unique = int(jnp.sum(first))  # the result's nnz: a size read from the device, as CPU computes it
    segment = jnp.cumsum(first) - 1
    summed = jax.ops.segment_sum(values[order], segment, num_segments=unique)
    positions = sorted_linear[jnp.nonzero(first, size=unique)[0]]
    new_indices = []
    rest = positions
    for d in reversed(range(sparse_dim)):
        new_indices.append(rest % self.shape[d])
        rest = rest // self.shape[d]
    new_indices = jnp.stack(new_indices[::-1]) if sparse_dim else jnp.zeros((0, unique), jnp.int64)
    if values.dtype == jnp.bool_:
        summed = summed.astype(jnp.bool_)
    return make_coo(
        self,
        sparse_dim,
        self.dense_dim(),
        self.shape,
        tensor.wrap(new_indices.astype(indices.dtype)),
        tensor.wrap(summed.astype(values.dtype)),
        coalesced=True,
    )


def _dense_to_coo(self, sparse_dim):
    if not 0 < sparse_dim <= self.dim() and not (sparse_dim == 0 and self.dim() == 0):
        raise RuntimeError(f"sparse_dim argument must be in [1,{self.dim()}] range, but {sparse_dim} is given")
    x = J(self)
    sparse_shape = tuple(self.shape[:sparse_dim])
    flat = x.reshape((*sparse_shape, -1)) if self.dim() > sparse_dim else x
    nonzero = flat != 0 if self.dim() == sparse_dim else jnp.any(flat != 0, axis=-1)
    count = int(jnp.sum(nonzero))  # nnz: read from the device, as CPU's nonzero does
    if sparse_dim:
        where = jnp.nonzero(nonzero, size=count)
        indices, values = jnp.stack(where), x[where]
    else:  # a 0-dim tensor: one value if it is nonzero, none if it is zero (CPU's nnz)
        indices, values = jnp.zeros((0, count), jnp.int64), x.reshape(1)[:count]
    return make_coo(
        self,
        sparse_dim,
        self.dim() - sparse_dim,
        self.shape,
        tensor.wrap(indices.astype(jnp.int64)),
        tensor.wrap(values),
        coalesced=True,
    )


def _dense_to_csr(self, dense_dim=None):
    if self.dim() != 2 or dense_dim not in (None, 0):
        raise unsupported_layout("sparse_csr with batch or dense dimensions")
    x = J(self)
    nonzero = x != 0
    count = int(jnp.sum(nonzero))
    rows, cols = jnp.nonzero(nonzero, size=count)
    crow = jnp.concatenate([jnp.zeros((1,), jnp.int64), jnp.cumsum(jnp.sum(nonzero, axis=1, dtype=jnp.int64))])
    return torch.sparse_csr_tensor(
        tensor.wrap(crow),
        tensor.wrap(cols.astype(jnp.int64)),
        tensor.wrap(x[rows, cols]),
        list(self.shape),
        dtype=self.dtype,
        device=self.device,
        check_invariants=False,
    )


def _dense_to_csc(self, dense_dim=None):
    csr = _dense_to_csr(self.t(), dense_dim)  # the CSC of x is the CSR of x.T, read by columns
    return torch.sparse_csc_tensor(
        csr.crow_indices(),
        csr.col_indices(),
        csr.values(),
        list(self.shape),
        dtype=self.dtype,
        device=self.device,
        check_invariants=False,
    )


@register(aten._to_sparse.sparse_dim)
def to_sparse_dim(self, sparse_dim):
    return _dense_to_coo(self, sparse_dim)


@register(aten._to_sparse.default)
def to_sparse(self, *, layout=None, blocksize=None, dense_dim=None):
    if layout in (None, torch.sparse_coo):
        if blocksize is not None:
            raise RuntimeError("to_sparse for Strided to Sparse conversion does not use specified blocksize")
        return _dense_to_coo(self, self.dim() - (dense_dim or 0))
    if layout == torch.sparse_csr and blocksize is None:
        return _dense_to_csr(self, dense_dim)
    if layout == torch.sparse_csc and blocksize is None:
        return _dense_to_csc(self, dense_dim)
    raise unsupported_layout(layout)


@register(aten._to_sparse_csr.default)
def to_sparse_csr(self, dense_dim=None):
    return _dense_to_csr(self, dense_dim)


@register(aten._to_sparse_csc.default)
def to_sparse_csc(self, dense_dim=None):
    return _dense_to_csc(self, dense_dim)


for _op in (aten._to_sparse_bsr.default, aten._to_sparse_bsc.default):
    _layout = {"bsr": torch.sparse_bsr, "bsc": torch.sparse_bsc}[_op.name()[-3:]]

    def _refuse(self, *args, _layout=_layout, **kwargs):
        raise unsupported_layout(_layout)

    register(_op)(_refuse)


def _coo_to_compressed(self, layout, blocksize=None, dense_dim=None):
    if blocksize is not None or layout not in (torch.sparse_csr, torch.sparse_csc):
        raise unsupported_layout(layout)
    if self.dim() != 2 or self.dense_dim() != 0 or dense_dim not in (None, 0):
        raise unsupported_layout(f"{layout} with batch or dense dimensions")
    source = self if layout == torch.sparse_csr else self.t()
    source = source.coalesce()  # sorted by row, then column
    idx, values = J(source._indices()), J(source._values())
    rows = source.shape[0]
    counts = jnp.zeros((rows,), jnp.int64).at[idx[0]].add(1)
    compressed = tensor.wrap(jnp.concatenate([jnp.zeros((1,), jnp.int64), jnp.cumsum(counts)]))
    make = torch.sparse_csr_tensor if layout == torch.sparse_csr else torch.sparse_csc_tensor
    return make(
        compressed,
        tensor.wrap(idx[1]),
        tensor.wrap(values),
        list(self.shape),
        dtype=self.dtype,
        device=self.device,
        check_invariants=False,
    )


def _coo_layout_change(self, *, layout=None, blocksize=None, dense_dim=None):
    if layout in (None, torch.sparse_coo):
        return self
    return _coo_to_compressed(self, layout, blocksize, dense_dim)


def _coo_to_csr(self, dense_dim=None):
    return _coo_to_compressed(self, torch.sparse_csr, None, dense_dim)


def _coo_to_csc(self, dense_dim=None):
    return _coo_to_compressed(self, torch.sparse_csc, None, dense_dim)


def _compressed_to_coo(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    if layout not in (None, torch.sparse_coo):
        raise unsupported_layout(f"{self.layout} to {layout} conversion")
    if sparse_dim not in (None, 2):
        key = "SparseCsr" if self.layout == torch.sparse_csr else "SparseCsc"
        raise RuntimeError(
            f"sparse_compressed_to_sparse: conversion from {key} to Sparse with sparse_dim argument !=2 is not supported"
        )
    rows, cols, values = compressed_parts(self)
    indices = jnp.stack([rows, cols]).astype(jnp.int64)
    # CSR elements come in row-major order (coalesced); CSC ones column-major, which CPU keeps (uncoalesced)
    coalesced = self.layout == torch.sparse_csr
    return make_coo(self, 2, 0, self.shape, tensor.wrap(indices), tensor.wrap(values), coalesced=coalesced)


register_layout_kernel(aten._to_dense.default, _to_dense_coo, "SparsePrivateUse1")
register_layout_kernel(aten._to_dense.default, _to_dense_csr, "SparseCsrPrivateUse1")
register_layout_kernel(aten._coalesce.default, _coalesce, "SparsePrivateUse1")
register_layout_kernel(aten._to_sparse.default, _coo_layout_change, "SparsePrivateUse1")
register_layout_kernel(aten._to_sparse_csr.default, _coo_to_csr, "SparsePrivateUse1")
register_layout_kernel(aten._to_sparse_csc.default, _coo_to_csc, "SparsePrivateUse1")
register_layout_kernel(aten._to_sparse.default, _compressed_to_coo, "SparseCsrPrivateUse1")
register_layout_kernel(aten._to_sparse.sparse_dim, _compressed_to_coo, "SparseCsrPrivateUse1")
