"""Matrix products: mm, bmm, addmm, baddbmm, dot, mv (linear, matmul and einsum decompose to them).

Precision is the device's contract (kit.product_precision): half inputs multiply as they are and
accumulate in float32, rounded once (addmm/baddbmm fold beta and alpha in before that rounding);
float32 follows `torch.set_float32_matmul_precision` ("highest", PyTorch's default, is full float32);
float64, complex and integer products are exact. Integer products accumulate in their own dtype, and
take beta and alpha converted to it, as PyTorch's do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import (
    J,
    jitted,
    matmul,
    matmul_over_rows,
    on_views,
    product_precision,
    rows_of,
    unflattened,
    wrap_dim,
)
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.kit.precision import body_at_precision
from jaxdev.ops.registry import aten, check_cast, register, register_functional, store_into


def _same_dtype(name, *ts):
    first = ts[0].dtype
    for t in ts[1:]:
        if t.dtype != first:
            raise RuntimeError(
                f"expected m1 and m2 to have the same dtype, but got: {first} != {t.dtype}"
                if name in ("mm", "addmm", "bmm", "baddbmm")
                else f"{name}: expected all inputs to have the same dtype, but got {first} and {t.dtype}"
            )
    return first


def _no_bool_product(name: str, dtype: torch.dtype, out_numel: int, inner: int) -> None:
    """CPU's product kernels have no Bool case; they return before it when the result is empty or the
    inner dimension is 0 (a product of no terms: zeros). dot refuses always (`inner` None)."""
    if dtype == torch.bool and out_numel != 0 and inner != 0:
        raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")


@jitted
def _product(jdt, precision, accumulate):
    def run(a, b):
        return matmul(a, b, precision, accumulate).astype(jdt)

    return run


def _with_dtype(jdt) -> tuple:
    """The product factories' leading arguments: jdt, then product_precision's."""
    return (jdt, *product_precision(jdt))


def _product_for(dtype: torch.dtype):
    return body_at_precision(_product, dtype, _with_dtype)


@jitted
def _product_over_rows(jdt, precision, accumulate):
    def run(a, b):
        return matmul_over_rows(a, b, precision, accumulate).astype(jdt)

    return run


def _sources_of_rows(a, b):
    """(x, y) for `a @ b` where a is x's rows transposed (`x.view(-1, m).t()`) and b is y's rows, x and y
    traced N-D arrays over the same leading dims (kit.unflattened): a linear layer's weight gradient,
    as autograd's mm backward forms it from the layer's input and output gradient. None otherwise."""
    if a.dim() != 2 or a.stride() != (1, a.shape[0]):
        return None
    y = unflattened(b)
    x = unflattened(a.t()) if y is not None else None
    return None if x is None or x.shape[:-1] != y.shape[:-1] else (x, y)


def _matmul(a, b, dtype):
    source = unflattened(a) if b.dim() == 2 else None
    if source is not None:  # a traced [batch, seq, k] input flattened to rows: kept apart (kit.unflattened)
        return on_views(rows_of(_product_for(dtype)), (source, b))
    sources = _sources_of_rows(a, b) if b.dim() == 2 else None
    if sources is not None:  # contracted over the leading dims unflattened (kit.matmul_over_rows)
        jdt = dtypes.to_jax_dtype(dtype)
        return on_views(_product_over_rows(jdt, *product_precision(jdt)), sources)
    return on_views(_product_for(dtype), (a, b))


def _mm_checks(self, mat2):
    if self.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    if self.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({self.shape[0]}x{self.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})"
        )


@register_functional(aten.mm.default)
def mm(self, mat2):
    _mm_checks(self, mat2)
    dtype = _same_dtype("mm", self, mat2)
    _no_bool_product("addmm_impl_cpu_", dtype, self.shape[0] * mat2.shape[1], self.shape[1])
    return _matmul(self, mat2, dtype)


def _bmm_checks(self, mat2):
    if self.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if mat2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if self.shape[0] != mat2.shape[0] or self.shape[2] != mat2.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{self.shape[0]}, {self.shape[2]}] "
            f"but got: [{mat2.shape[0]}, {mat2.shape[1]}]."
        )


@register_functional(aten.bmm.default)
def bmm(self, mat2):
    _bmm_checks(self, mat2)
    dtype = _same_dtype("bmm", self, mat2)
    _no_bool_product("bmm", dtype, self.shape[0] * self.shape[1] * mat2.shape[2], self.shape[2])
    return _matmul(self, mat2, dtype)


@register_functional(aten.addmm.default)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    dtype = _same_dtype("addmm", mat1, mat2, self)
    _mm_checks(mat1, mat2)
    _no_bool_product("addmm_impl_cpu_", dtype, mat1.shape[0] * mat2.shape[1], mat1.shape[1])
    return _scaled(self, mat1, mat2, beta, alpha, dtype)


@register_functional(aten.baddbmm.default)
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    dtype = _same_dtype("baddbmm", batch1, batch2, self)
    _bmm_checks(batch1, batch2)
    _no_bool_product("baddbmm", dtype, batch1.shape[0] * batch1.shape[1] * batch2.shape[2], batch1.shape[2])
    return _scaled(self, batch1, batch2, beta, alpha, dtype)


@jitted
def _scaled_product(jdt, precision, accumulate, use_self, unit):
    """beta * self + alpha * (a @ b), rounded once; beta == 0 ignores self (its NaNs too). `unit`: the
    used factors are the integer 1 and the dtype real, so their products change no bit and are left
    out: multiplied by runtime scalars, a linear layer's product reshaped to rows and back (kit.rows_of
    under a traced view) kept XLA's TPU compiler from fusing the residual add's float32 convert into
    it, 12 unfused converts of [batch * seq, d] in the LM step (issue 37)."""
    compute = accumulate or jdt

    def run(s, a, b, beta, alpha):
        prod = matmul(a, b, precision, accumulate).astype(compute)
        out = prod if unit else prod * alpha
        if use_self:
            out = (s.astype(compute) if unit else s.astype(compute) * beta) + out
        return jnp.broadcast_to(out, jnp.broadcast_shapes(s.shape, prod.shape)).astype(jdt)

    return run


def _scaled(self, a, b, beta, alpha, dtype):
    dtypes.to_jax_dtype(dtype)  # a dtype JAX lacks refuses first, before beta and alpha are read
    if not (dtype.is_floating_point or dtype.is_complex):
        beta, alpha = int(beta), int(alpha)  # PyTorch converts them to the integer dtype first
    used = (alpha, beta) if beta != 0 else (alpha,)
    unit = not dtype.is_complex and all(type(k) is int and k == 1 for k in used)
    body = body_at_precision(_scaled_product, dtype, _with_dtype, beta != 0, unit)
    source = unflattened(a) if a.dim() == 2 and self.dim() <= 1 else None
    if source is not None:  # a traced [batch, seq, k] input flattened to rows: kept apart (kit.unflattened)
        return on_views(rows_of(body), (self, source, b), (beta, alpha))
    return on_views(body, (self, a, b), (beta, alpha))


@register_functional(aten.dot.default)
def dot(self, tensor):
    if self.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors")
    if self.shape[0] != tensor.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{self.shape[0]}] and src [{tensor.shape[0]}] to have the same number of elements, but got {self.shape[0]} and {tensor.shape[0]} elements respectively"
        )
    dtype = self.dtype
    if tensor.dtype != dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found {dtypes.scalar_name(dtype)} and {dtypes.scalar_name(tensor.dtype)}"
        )
    _no_bool_product("dot", dtype, 1, None)
    return _matmul(self, tensor, dtype)


@register_functional(aten.mv.default)
def mv(self, vec):
    if self.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {self.dim()}, {vec.dim()}")
    if self.shape[1] != vec.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({self.shape[0]}), mat ({self.shape[0]}x{self.shape[1]}), vec ({vec.shape[0]})"
        )
    dtype = _same_dtype("mv", self, vec)
    _no_bool_product("addmv_impl_cpu", dtype, self.shape[0], self.shape[1])
    return _matmul(self, vec, dtype)


@register_functional(aten.vdot.default)
def vdot(self, other):
    if self.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and {other.dim()}D tensors")
    if self.dtype != other.dtype:
        raise RuntimeError(
            f"vdot : expected both vectors to have same dtype, but found {dtypes.scalar_name(self.dtype)} and {dtypes.scalar_name(other.dtype)}"
        )
    if self.shape[0] != other.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{self.shape[0]}] and src [{other.shape[0]}] to have the same number of elements, but got {self.shape[0]} and {other.shape[0]} elements respectively"
        )
    a = J(self)
    return _matmul_arrays(jnp.conj(a) if jnp.iscomplexobj(a) else a, J(other), self.dtype)


def _matmul_arrays(a, b, dtype):
    return _product_for(dtype)(a, b)


@register_functional(aten.addmv.default)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    dtype = _same_dtype("addmv", mat, vec, self)
    if mat.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {self.dim()}, {mat.dim()}, {vec.dim()}")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({self.shape[0] if self.dim() else 1}), mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})"
        )
    _no_bool_product("addmv_impl_cpu", dtype, mat.shape[0], mat.shape[1])
    return _scaled(self, mat, vec, beta, alpha, dtype)


# addbmm: CPU adds the batches' products into the result one addmm_ at a time (BLAS order). Here each
# batch's product is one dot (kit.product_precision), scaled by alpha and summed over the batches
# in the compute dtype, then rounded once: measured on the OpInfo samples and on random ones, at
# least as close to the float64 result as CPU's in most cases (one dot over batch and k together was
# further away). Complex products are taken as four real dots: XLA's complex dot lands further
# from the exact product than CPU's complex gemm.


def _dot(a, b, precision, accumulate):
    if jnp.iscomplexobj(a):
        re = lambda x, y: matmul(x, y, precision, accumulate)
        return jax.lax.complex(re(a.real, b.real) - re(a.imag, b.imag), re(a.real, b.imag) + re(a.imag, b.real))
    return matmul(a, b, precision, accumulate)


@jitted
def _summed_products(jdt, precision, accumulate, use_self):
    """beta * self + sum_b alpha * (a[b] @ b[b]), rounded once; beta == 0 ignores self (its NaNs too)."""
    compute = accumulate or jdt

    def run(s, a, b, beta, alpha):
        total = jnp.sum(_dot(a, b, precision, accumulate).astype(compute) * alpha, axis=0, dtype=compute)
        out = s.astype(compute) * beta + total if use_self else total
        return out.astype(jdt)

    return run


def _scaled_self(s, beta, jdt):
    """`result.copy_(self); result.mul_(beta)` (or zero_() where beta is 0): CPU's result where no
    product is added (no batches, or an empty inner dim), with mul_'s cast check."""
    dtype = dtypes.to_torch_dtype(jdt)
    if complex(beta) == 0:
        return jnp.zeros(s.shape, jdt)
    check_cast(torch.result_type(torch.empty((), dtype=dtype), beta), dtype)
    if jdt == jnp.bool_:
        return s.astype(jdt) & bool(beta)
    compute = dtypes.opmath(jdt)
    if jnp.issubdtype(jdt, jnp.integer):
        return (s.astype(jdt) * jnp.asarray(int(beta), jnp.int64).astype(jdt)).astype(jdt)
    return (s.astype(compute) * beta).astype(jdt)


def _addbmm(self, batch1, batch2, beta, alpha, dtype):
    """CPU's addbmm_out into a result of `dtype` (its checks and errors, in its order)."""
    size = [batch1.size(1), batch2.size(2)]  # CPU's expand_size comes first, with its errors
    if self.dim() > 2:
        raise RuntimeError(
            f"expand(torch.{dtypes.scalar_name(self.dtype)}Tensor{{{list(self.shape)}}}, size={size}): the number of "
            f"sizes provided (2) must be greater or equal to the number of dimensions in the tensor ({self.dim()})"
        )
    s = self.expand(*size)
    if batch1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    (nb, n, k), (nb2, k2, m) = batch1.shape, batch2.shape
    if nb != nb2:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {nb} and {nb2}")
    if k != k2:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{k} and {k2}x{m})")
    jdt = dtypes.to_jax_dtype(dtype)
    if nb == 0:
        return _scaled_self(J(s), beta, jdt)
    # each batch is `result.addmm_(batch1[b], batch2[b])`: addmm's checks on the result's dtype
    if dtype != batch2.dtype:
        raise RuntimeError(
            f"self and mat2 must have the same dtype, but got {dtypes.scalar_name(dtype)} and "
            f"{dtypes.scalar_name(batch2.dtype)}"
        )
    if batch1.dtype != batch2.dtype:
        raise RuntimeError(
            f"mat1 and mat2 must have the same dtype, but got {dtypes.scalar_name(batch1.dtype)} and "
            f"{dtypes.scalar_name(batch2.dtype)}"
        )
    if n * m == 0:
        return jnp.zeros((n, m), jdt)
    if k == 0:
        if nb > 1 and dtype == torch.bool:  # the later batches' addmm_ multiply by an integer 1
            check_cast(torch.int64, dtype)
        return _scaled_self(J(s), beta, jdt)
    if dtype == torch.bool:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    opmath = dtypes.to_torch_dtype(dtypes.opmath(jdt))
    beta, alpha = _scalar_as(beta, opmath), _scalar_as(alpha, opmath)  # CPU's Scalar::to, overflow checked
    body = _summed_products(jdt, *product_precision(jdt), beta != 0)
    return body(J(s), J(batch1), J(batch2), beta, alpha)


@register_functional(aten.addbmm.default, out=False)
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    return _addbmm(self, batch1, batch2, beta, alpha, self.dtype)


@register(aten.addbmm.out)
def addbmm_out(self, batch1, batch2, *, beta=1, alpha=1, out):
    """The result's dtype is out's (CPU's addmm_ checks it against the batches; self is copied in)."""
    tensor.check_no_partial_overlap(out, (self, batch1, batch2))
    value = _addbmm(self, batch1, batch2, beta, alpha, out.dtype)
    if tuple(out.shape) != tuple(value.shape):
        out.resize_(value.shape)  # CPU's resize_as_, without resize_output's warning
    return store_into(out, value, resize=False)


def _scalar_as(value, dtype):
    """A Scalar converted to `dtype` as CPU's `Scalar::to<scalar_t>` does (rounded to half for half,
    overflow checked, with CPU's message): a CPU fill performs that very conversion."""
    return torch.full((), value, dtype=dtype).item()


@jitted
def _outer_update(jdt, use_self):
    """CPU's addr loop, `beta * self + alpha * vec1 * vec2`, evaluated left to right in the result
    dtype: each half operation computes in float32 and rounds to the half dtype, as Vectorized<Half>
    and c10::Half arithmetic do."""
    if jdt == jnp.bool_:

        def run(s, v1, v2, beta, alpha):
            prod = alpha & v1[:, None] & v2[None, :]
            return (beta & s) | prod if use_self else prod

        return run
    compute = dtypes.opmath(jdt)
    half = jdt in (jnp.float16, jnp.bfloat16)
    rounded = round_to(jdt) if half else (lambda x: x)  # other dtypes compute in their own
    # beta and alpha arrive as Python numbers already converted to jdt's values (_scalar_as): a half's
    # value is a float32 exactly, so they enter float32 without a float64 -> half convert
    scalar_dtype = compute if half else jdt

    def run(s, v1, v2, beta, alpha):
        beta, alpha = jnp.asarray(beta, scalar_dtype).astype(compute), jnp.asarray(alpha, scalar_dtype).astype(compute)
        prod = rounded(rounded(alpha * v1[:, None].astype(compute)) * v2[None, :].astype(compute))
        return (rounded(beta * s.astype(compute)) + prod if use_self else prod).astype(jdt)

    return run


@register_functional(aten.addr.default)
def addr(self, vec1, vec2, *, beta=1, alpha=1):
    for t, name in ((vec1, "vec1"), (vec2, "vec2")):
        if t.dim() != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {t.dim()}-D")
    dtype = torch.promote_types(torch.promote_types(self.dtype, vec1.dtype), vec2.dtype)
    for value, name in ((beta, "beta"), (alpha, "alpha")):
        if isinstance(value, bool) and dtype != torch.bool:
            raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
        if not (dtype.is_floating_point or dtype.is_complex) and not isinstance(value, (bool, int)):
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    beta, alpha = _scalar_as(beta, dtype), _scalar_as(alpha, dtype)
    s = self.expand(vec1.shape[0], vec2.shape[0])  # CPU's expand_size, with its error
    jdt = dtypes.to_jax_dtype(dtype)
    return _outer_update(jdt, bool(beta != 0))(J(s).astype(jdt), J(vec1).astype(jdt), J(vec2).astype(jdt), beta, alpha)


def _cross(a, b, axis):
    a, b = jnp.moveaxis(a, axis, -1), jnp.moveaxis(b, axis, -1)
    if a.dtype in (jnp.float16, jnp.bfloat16):
        return jnp.moveaxis(_half_cross()(a, b), -1, axis)
    return jnp.moveaxis(jnp.cross(a, b), -1, axis)


@jitted
def _half_cross():
    """CPU's cross in c10::Half / BFloat16 arithmetic, a[i] * b[j] - a[j] * b[i] with each product and
    the difference rounded, stated in float32 (in float16 a CPU with native float16 fuses a product
    into the difference: issue 41)."""

    def run(a, b):
        half, r = a.dtype, round_to(a.dtype)
        a, b = a.astype(jnp.float32), b.astype(jnp.float32)
        parts = [r(r(a[..., i] * b[..., j]) - r(a[..., j] * b[..., i])) for i, j in ((1, 2), (2, 0), (0, 1))]
        return jnp.stack(parts, axis=-1).astype(half)

    return run


@register_functional(aten.linalg_cross.default)
def linalg_cross(self, other, *, dim=-1):
    if self.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if self.shape[wrap_dim(dim, self.dim())] != 3 or other.shape[wrap_dim(dim, other.dim())] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {self.shape[dim]} and {other.shape[dim]}"
        )
    if self.dtype != other.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_name(self.dtype)} but found {dtypes.scalar_name(other.dtype)}"
        )
    if self.dtype == torch.bool:
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    a, b = J(self), J(other)
    shape = jnp.broadcast_shapes(a.shape, b.shape)
    return _cross(jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape), wrap_dim(dim, self.dim()))
