"""Sparse x dense products (mm, addmm, addmv with out=) as a segment sum over the stored elements;
mv runs CPU's own kernel, which calls ops on the components."""

from __future__ import annotations

import jax
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J
from jaxdev.ops.registry import aten, register_layout_kernel, store_into
from jaxdev.ops.sparse.components import SPARSE_CPU, compressed_parts, needs_cpu, redispatch, unsupported_layout


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
            raise needs_cpu(aten.addmm.default, self.layout)
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


register_layout_kernel(aten.mm.default, _mm(_coo_rows_cols), "SparsePrivateUse1")
register_layout_kernel(aten.mv.default, redispatch(aten.mv.default, SPARSE_CPU), "SparsePrivateUse1")
register_layout_kernel(aten.mm.default, _mm(compressed_parts), "SparseCsrPrivateUse1")
register_layout_kernel(aten.addmm.default, _addmm(_coo_rows_cols), "SparsePrivateUse1")
register_layout_kernel(aten.addmm.default, _addmm(compressed_parts), "SparseCsrPrivateUse1")
register_layout_kernel(aten.addmv.out, _addmv_out(compressed_parts), "SparseCsrPrivateUse1")
