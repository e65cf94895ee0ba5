"""Sparse COO and CSR tensors on `jax`: PyTorch's own sparse tensors whose indices and values are jax tensors.

PyTorch builds a sparse tensor for any backend device (`new_sparse` gives a PrivateUse1 device the
SparsePrivateUse1 key; compressed layouts get SparseCsrPrivateUse1), and its CPU kernels for sparse
*metadata* (creation from indices and values, `_nnz`, `_indices`, `crow_indices`, `clone`, `copy_`, ...)
only call other ops on the component tensors. So those run as they are, redispatched to SparseCPU /
SparseCsrCPU, and their components stay jax tensors. The kernels that compute on the values
(`to_dense`, `coalesce`, dense -> sparse, sparse x dense products) are written in JAX below. Any other
sparse op runs on CPU through the CPU fallback's policy (JAXDEV_FALLBACK: counted, warned, or refused),
never reaching a dispatcher error. Layouts jaxdev does not hold (CSC, BSR, BSC) raise UnsupportedLayoutError.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch
from torch.utils._pytree import tree_map

from jaxdev import dtypes, fallback, tensor
from jaxdev.ops.registry import aten, register, register_layout_kernel, store_into
from jaxdev.ops.toolkit import J

_FALLBACK_LIB = torch.library.Library("_", "IMPL")
_SPARSE_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCPU)
_SPARSE_CSR_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCsrCPU)

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
    aten.sparse_resize_.default,
    aten.sparse_resize_and_clear_.default,
    aten.zero_.default,
    aten.empty.memory_format,
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

SUPPORTED = "creation, to_dense, coalesce, indices/values, t/transpose, and products with dense tensors"


def _redispatch(op, keys):
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


_make_coo_kernel = _redispatch(aten._sparse_coo_tensor_with_dims_and_tensors.default, _SPARSE_CPU)


def _make_coo(like, sparse_dim, dense_dim, shape, indices, values, *, coalesced):
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


# --- sparse -> dense ---------------------------------------------------------------------------


def _scatter_dense(shape, linear_index_parts, values, jdt):
    """Dense array of `shape` with `values` (nnz, *dense dims) added at the sparse positions."""
    out = jnp.zeros(shape, jdt)
    if values.shape[0] == 0 or 0 in shape:
        return out
    if not linear_index_parts:  # no sparse dims (a 0-dim tensor): the values add up in place
        return out + values.sum(0).astype(jdt)
    return out.at[tuple(linear_index_parts)].add(values.astype(jdt), mode="drop")


def _csr_rows(crow: jax.Array, nnz: int) -> jax.Array:
    """The row of each stored element of a CSR tensor (crow_indices expanded)."""
    rows = crow.shape[0] - 1
    return jnp.repeat(jnp.arange(rows, dtype=crow.dtype), jnp.diff(crow), total_repeat_length=nnz)


def _to_dense_coo(self, dtype=None, masked_grad=None):
    if dtype is not None and dtype != self.dtype:
        raise RuntimeError("dtype argument is not supported by sparse_to_dense")
    jdt = dtypes.to_jax_dtype(self.dtype)
    idx = J(self._indices())
    parts = [idx[d] for d in range(idx.shape[0])]
    return tensor.wrap(_scatter_dense(tuple(self.shape), parts, J(self._values()), jdt))


def _compressed_parts(sparse):
    """(row, column, value) of each stored element of a 2-D CSR or CSC tensor."""
    if sparse.dim() != 2 or sparse.dense_dim() != 0:
        raise unsupported_layout(f"{sparse.layout} with batch or dense dimensions")
    if sparse.layout not in (torch.sparse_csr, torch.sparse_csc):
        raise unsupported_layout(sparse.layout)
    values = J(sparse.values())
    if sparse.layout == torch.sparse_csr:
        return _csr_rows(J(sparse.crow_indices()), values.shape[0]), J(sparse.col_indices()), values
    return J(sparse.row_indices()), _csr_rows(J(sparse.ccol_indices()), values.shape[0]), values


def _to_dense_csr(self, dtype=None, masked_grad=None):
    if dtype is not None and dtype != self.dtype:
        raise RuntimeError("dtype argument is not supported by sparse_csr_to_dense")
    rows, cols, values = _compressed_parts(self)
    jdt = dtypes.to_jax_dtype(self.dtype)
    return tensor.wrap(_scatter_dense(tuple(self.shape), [rows, cols], values, jdt))


# --- coalesce ------------------------------------------------------------------------------------


def _coalesce(self):
    sparse_dim = self.sparse_dim()
    indices, values = J(self._indices()), J(self._values())
    nnz = values.shape[0]
    if nnz < 2:
        return _make_coo(
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
    return _make_coo(
        self,
        sparse_dim,
        self.dense_dim(),
        self.shape,
        tensor.wrap(new_indices.astype(indices.dtype)),
        tensor.wrap(summed.astype(values.dtype)),
        coalesced=True,
    )


# --- dense -> sparse ----------------------------------------------------------------------------


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
    return _make_coo(
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
    rows, cols, values = _compressed_parts(self)
    indices = jnp.stack([rows, cols]).astype(jnp.int64)
    # CSR elements come in row-major order (coalesced); CSC ones column-major, which CPU keeps (uncoalesced)
    coalesced = self.layout == torch.sparse_csr
    return _make_coo(self, 2, 0, self.shape, tensor.wrap(indices), tensor.wrap(values), coalesced=coalesced)


# --- sparse x dense -----------------------------------------------------------------------------


def _coo_rows_cols(sparse):
    idx = J(sparse._indices())
    return idx[0], idx[1], J(sparse._values())


def _product(sparse, dense, parts):
    if sparse.dim() != 2 or dense.dim() != 2 or sparse.dense_dim() != 0:
        raise RuntimeError(
            f"jaxdev: a sparse x dense product on jax needs a 2-D sparse matrix and a 2-D dense matrix, got "
            f"{sparse.dim()}-D ({sparse.dense_dim()} dense dims) and {dense.dim()}-D"
        )
    if dense.device.type != "jax":
        raise tensor.mixed_devices(dense.device)
    if dense.layout != torch.strided:
        raise unsupported_layout(f"{dense.layout} x {sparse.layout} product")
    if sparse.shape[1] != dense.shape[0]:  # CPU's messages, per layout
        if sparse.layout == torch.sparse_coo:
            raise RuntimeError(
                f"addmm: Argument #3 (dense): Expected dim 0 size {sparse.shape[1]}, got {dense.shape[0]}"
            )
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({sparse.shape[0]}x{sparse.shape[1]} and "
            f"{dense.shape[0]}x{dense.shape[1]})"
        )
    if sparse.dtype != dense.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_name(sparse.dtype)} but found {dtypes.scalar_name(dense.dtype)}"
        )
    rows, cols, values = parts(sparse)
    b = J(dense)
    terms = values[:, None] * b[cols]
    return jax.ops.segment_sum(terms, rows, num_segments=sparse.shape[0])


def _mm(parts):
    def mm(self, mat2):
        return tensor.wrap(_product(self, mat2, parts))

    return mm


def _addmm(parts):
    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        if mat1.layout == torch.strided:  # a sparse `self` with dense mat1: not a product jaxdev computes
            raise _needs_cpu(aten.addmm.default, self.layout)
        product = _product(mat1, mat2, parts)
        dense_self = self.to_dense() if self.layout != torch.strided else self
        base = J(dense_self.expand(list(product.shape)))  # CPU's broadcast error, word for word
        if beta == 0:
            out = alpha * product
        else:
            out = beta * base + alpha * product
        return tensor.wrap(out.astype(product.dtype))

    return addmm


def _addmv_out(parts):
    def addmv_out(self, mat, vec, *, beta=1, alpha=1, out):
        product = _product(mat, vec.unsqueeze(1), parts)[:, 0]
        base = J(self.expand(list(product.shape)))
        value = alpha * product if beta == 0 else beta * base + alpha * product
        return store_into(out, value.astype(product.dtype), resize=True)

    return addmv_out


def _needs_cpu(op, layout):
    return fallback.FallbackError(
        f"{op.name()} has no jax kernel for {str(layout).removeprefix('torch.')} tensors "
        f"(jax computes {SUPPORTED}), and JAXDEV_FALLBACK=error forbids running it on CPU"
    )


# --- everything else: CPU, under the fallback's policy ---------------------------------------------


def _layout_of(args, kwargs):
    found = []

    def visit(x):
        if isinstance(x, torch.Tensor) and x.layout != torch.strided:
            found.append(x.layout)

    tree_map(visit, (args, kwargs))
    return found[0] if found else torch.sparse_coo


def sparse_fallback(op, *args, **kwargs):
    """Runs a sparse op without a jax kernel on CPU (as the dense fallback does): counted, warned once,
    refused under JAXDEV_FALLBACK=error."""
    layout = _layout_of(args, kwargs)
    if layout not in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        raise unsupported_layout(layout)
    if fallback.mode() == "error":
        raise _needs_cpu(op, layout)
    fallback.admit(
        op,
        args,
        kwargs,
        view_of=f"a {str(layout).removeprefix('torch.')} tensor",
        kernel="jax kernel for sparse tensors",
    )
    originals: dict[int, torch.Tensor] = {}

    def to_cpu(x):
        if tensor.is_jax(x):
            c = x.detach().to("cpu") if x.layout != torch.strided else x.detach().to("cpu").clone()
            originals[id(c)] = x
            return c
        if isinstance(x, torch.device) and x.type == "jax":
            return torch.device("cpu")
        return x

    cpu_args, cpu_kwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)
    if isinstance(cpu_kwargs.get("device"), str) and cpu_kwargs["device"].startswith("jax"):
        cpu_kwargs["device"] = "cpu"
    result = op(*cpu_args, **cpu_kwargs)
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            changed = fallback._schema_value(op._schema, i, cpu_args, cpu_kwargs)
            for c in changed if isinstance(changed, (list, tuple)) else [changed]:
                if isinstance(c, torch.Tensor) and id(c) in originals:
                    with torch.no_grad():
                        originals[id(c)].copy_(c.to("jax"))

    def to_jax(x):
        if isinstance(x, torch.Tensor):
            return originals[id(x)] if id(x) in originals else x.to("jax")
        return x

    return tree_map(to_jax, result)


def _install() -> None:
    coo, csr = "SparsePrivateUse1", "SparseCsrPrivateUse1"
    for op in COO_METADATA:
        register_layout_kernel(op, _redispatch(op, _SPARSE_CPU), coo)
    for op in CSR_METADATA:
        register_layout_kernel(op, _redispatch(op, _SPARSE_CSR_CPU), csr)
    register_layout_kernel(aten._to_dense.default, _to_dense_coo, coo)
    register_layout_kernel(aten._to_dense.default, _to_dense_csr, csr)
    register_layout_kernel(aten._coalesce.default, _coalesce, coo)
    register_layout_kernel(aten._to_sparse.default, _coo_layout_change, coo)
    register_layout_kernel(aten._to_sparse_csr.default, _coo_to_csr, coo)
    register_layout_kernel(aten._to_sparse_csc.default, _coo_to_csc, coo)
    register_layout_kernel(aten._to_sparse.default, _compressed_to_coo, csr)
    register_layout_kernel(aten._to_sparse.sparse_dim, _compressed_to_coo, csr)
    register_layout_kernel(aten.mm.default, _mm(_coo_rows_cols), coo)
    register_layout_kernel(aten.mv.default, _redispatch(aten.mv.default, _SPARSE_CPU), coo)
    register_layout_kernel(aten.mm.default, _mm(_compressed_parts), csr)
    register_layout_kernel(aten.addmm.default, _addmm(_coo_rows_cols), coo)
    register_layout_kernel(aten.addmm.default, _addmm(_compressed_parts), csr)
    register_layout_kernel(aten.addmv.out, _addmv_out(_compressed_parts), csr)
    _FALLBACK_LIB.fallback(sparse_fallback, coo)
    _FALLBACK_LIB.fallback(sparse_fallback, csr)


_install()
