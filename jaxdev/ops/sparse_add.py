"""add and add_ with sparse COO tensors on jax (SparsePrivateUse1): sparse + sparse and dense + sparse,
as CPU's add_out_sparse_cpu / add_out_dense_sparse_cpu compute them.

* sparse + sparse: both sets of entries, `other`'s times alpha, in the common dtype. When both inputs
  are coalesced the result is too (duplicates summed, indices sorted: the entries CPU's merge of two
  sorted lists gives); otherwise the entries are concatenated, uncoalesced (CPU interleaves them: the
  same tensor, in another order).
* dense + sparse: alpha times the sparse values scattered into the dense tensor (a dense result).
* sparse + dense: refused in CPU's words.

In place, a sparse `self` takes the result's indices and values (SparseCPU's copy_sparse_to_sparse_, which
moves metadata only); a dense one is
written through its strides. Other sparse ops stay with ops/sparse's kernels and fallback.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.registry import aten, register_layout_kernel

COO = "SparsePrivateUse1"
_SPARSE_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCPU)
_COPY_SPARSE = aten.copy_sparse_to_sparse_.default._handle


def _check_alpha(dtype: torch.dtype, alpha) -> None:
    """CPU's alpha_check, which its out-of-place sparse add makes and add_ does not."""
    if dtype == torch.bool and not isinstance(alpha, bool):
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if not (dtype.is_floating_point or dtype.is_complex) and isinstance(alpha, float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


def _check_sizes(self, other) -> None:
    if tuple(self.shape) != tuple(other.shape):
        if self.layout == torch.sparse_coo:
            raise RuntimeError(
                f"add: expected sizes of 'self' and 'other' to match, but {list(self.shape)} != {list(other.shape)}"
            )
        raise RuntimeError(
            f"add: expected 'self' and 'other' to have same size, but self has size {list(self.shape)} while other "
            f"has size {list(other.shape)} (FYI: dense-sparse addition does not currently support broadcasting)"
        )


@jitted
def _scaled(jdt):
    return lambda values, alpha: (values.astype(jdt) * jnp.asarray(alpha).astype(jdt)).astype(jdt)


@jitted
def _scatter_add(sparse_dim, jdt):
    def run(dense, indices, values, alpha):
        scaled = values.astype(jdt) * jnp.asarray(alpha).astype(jdt)
        return dense.astype(jdt).at[tuple(indices[d] for d in range(sparse_dim))].add(scaled)

    return run


def _sparse_sum(self, other, alpha, dtype):
    """A new COO tensor: self + alpha * other, both COO of one shape."""
    if self.sparse_dim() != other.sparse_dim():
        raise RuntimeError(
            f"add: expected 'self' and 'other' to have same density, but 'self' has {self.sparse_dim()} sparse "
            f"dimensions while 'other' has {other.sparse_dim()} sparse dimensions"
        )
    jdt = dtypes.to_jax_dtype(dtype)
    indices = jnp.concatenate([J(self._indices()), J(other._indices())], axis=1)
    values = jnp.concatenate([J(self._values()).astype(jdt), _scaled(jdt)(J(other._values()), alpha)])
    result = aten._sparse_coo_tensor_with_dims_and_tensors(
        self.sparse_dim(),
        self.dense_dim(),
        list(self.shape),
        tensor.wrap(indices),
        tensor.wrap(values),
        dtype=dtype,
        layout=torch.sparse_coo,
        device=tensor.DEVICE,
        is_coalesced=False,
    )
    return result.coalesce() if self.is_coalesced() and other.is_coalesced() else result


def _dense_sum(self, other, alpha, dtype):
    """A dense jax array: self (dense) + alpha * other (COO)."""
    jdt = dtypes.to_jax_dtype(dtype)
    program = _scatter_add(other.sparse_dim(), jdt)
    return program(J(self), J(other._indices()), J(other._values()), alpha)


def _checked(self, other, alpha):
    if other.layout != torch.sparse_coo:
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    _check_sizes(self, other)
    return torch.promote_types(self.dtype, other.dtype)  # alpha is cast to it unchecked, as CPU's sparse add


def add(self, other, *, alpha=1):
    dtype = _checked(self, other, alpha)
    _check_alpha(dtype, alpha)
    if self.layout == torch.sparse_coo:
        return _sparse_sum(self, other, alpha, dtype)
    return tensor.wrap(_dense_sum(self, other, alpha, dtype))


def add_(self, other, *, alpha=1):
    dtype = _checked(self, other, alpha)
    if not torch.can_cast(dtype, self.dtype):
        result, output = dtypes.scalar_name(dtype), dtypes.scalar_name(self.dtype)
        raise RuntimeError(f"Can't convert result type {result} to output {output} in add operation")
    if self.layout == torch.sparse_coo:
        result = _sparse_sum(self, other, alpha, dtype)
        # SparseCPU's copy_sparse_to_sparse_ moves only metadata and calls ops on the components
        _COPY_SPARSE.redispatch_boxed(_SPARSE_CPU, self, result if dtype == self.dtype else result.to(self.dtype))
        return self
    tensor.write(self, _dense_sum(self, other, alpha, dtype).astype(dtypes.to_jax_dtype(self.dtype)))
    return self


register_layout_kernel(aten.add.Tensor, add, COO)
register_layout_kernel(aten.add_.Tensor, add_, COO)
