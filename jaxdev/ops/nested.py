"""Strided nested tensors on `jax`: PyTorch's own NestedTensorImpl over a jax buffer, and what
nn.TransformerEncoder's fast path runs on them.

The choice (issue 26 item 3): nested tensors work rather than being refused, since CPU's eval-mode
TransformerEncoder with a padding mask takes this path by default (enable_nested_tensor=True) and zeroes
the padded positions of its output, which the regular path does not: declining the fast path would give
other values there than CPU. So, as on CPU: `_nested_tensor_from_mask_left_aligned` (the encoder's mask
check), `_nested_tensor_from_mask` (the padded batch packed into a nested tensor),
`_transformer_encoder_layer_fwd` on the nested batch (each layer), and `to_padded_tensor` (back to a
padded batch, zeros where CPU puts them) are jax kernels. A nested tensor's buffer is an ordinary jax
tensor's storage, so PyTorch's NestedTensorCPU kernels that only read or write metadata and call ops on
the buffer (sizes, unbind, transpose, copies between devices, ...) run as they are, redispatched, and
their buffers stay on jax. Every other op on a jax nested tensor runs on CPU under the CPU fallback's
policy (JAXDEV_FALLBACK: counted and warned once, or refused in one sentence), never a dispatcher
error. Jagged-layout tensors (torch.jagged) are jax values under PyTorch's Python subclass; their
scaled_dot_product_attention converts to strided nested tensors on jax, whose scaling, products and
softmax are computed here component by component (COMPONENTWISE), with no fallback.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, fallback, tensor
from jaxdev.ops.kit import J, encoder_layer, jitted, matmul, product_precision
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.registry import aten, register, register_layout_kernel

NESTED = "NestedTensorPrivateUse1"
_FALLBACK_LIB = torch.library.Library("_", "IMPL")
_NESTED_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.NestedTensorCPU)
_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)

# NestedTensorCPU kernels that only read or write a nested tensor's metadata and call ops on its buffer.
METADATA = [
    aten._nested_tensor_size.default,
    aten._nested_tensor_strides.default,
    aten._nested_tensor_storage_offsets.default,
    aten.values.default,
    aten.unbind.int,
    aten.select.int,
    aten.transpose.int,
    aten.unsqueeze.default,
    aten.narrow.default,
    aten.detach.default,
    aten.alias.default,
    aten.is_same_size.default,
    aten.empty_like.default,
    aten._to_copy.default,
    aten.copy_.default,
    aten.clone.default,
]

SUPPORTED = (
    "from a padding mask, TransformerEncoder layers, to_padded_tensor, attention's products and softmax, "
    "unbind, transpose and copies"
)


def _redispatch(op, keys):
    handle = op._handle

    def kernel(*args, **kwargs):
        return handle.redispatch_boxed(keys, *args, **kwargs)

    return kernel


def _metadata(nt) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sizes, strides, offsets) of a nested tensor's components, as numpy int64 arrays."""
    return tuple(
        op._handle.redispatch_boxed(_NESTED_CPU, nt).numpy()
        for op in (
            aten._nested_tensor_size.default,
            aten._nested_tensor_strides.default,
            aten._nested_tensor_storage_offsets.default,
        )
    )


def _flat(nt) -> jax.Array:
    return J(aten.values.default._handle.redispatch_boxed(_NESTED_CPU, nt)).reshape(-1)


def _grid(sizes, strides, offsets, shape):
    """For a padded batch of `shape` (components, *dims): where each element is in the buffer, and
    whether it is one (False: padding)."""
    dims = shape[1:]
    grid = np.indices(dims).reshape(len(dims), -1)
    where = offsets[:, None] + strides @ grid
    valid = np.all(grid[None] < sizes[:, :, None], axis=1)
    extra = shape[0] - len(sizes)  # an output_size with more components than there are: padding
    where = np.concatenate([np.where(valid, where, 0), np.zeros((extra, grid.shape[1]), np.int64)])
    valid = np.concatenate([valid, np.zeros((extra, grid.shape[1]), bool)])
    return where.reshape(shape), valid.reshape(shape)


@jitted
def _pad_program():
    return lambda flat, where, valid, pad: jnp.where(valid, flat[where], pad.astype(flat.dtype))


@jitted
def _pack_program():
    return lambda padded, where: padded.reshape(-1)[where]


def padded(nt, padding, shape=None):
    """(padded batch as a jax array, valid mask as numpy) of nested tensor `nt`."""
    sizes, strides, offsets = _metadata(nt)
    if sizes.size == 0 and nt.size(0) > 0:  # components of no dims
        sizes = sizes.reshape(nt.size(0), 0)
    top = tuple(int(s) for s in sizes.max(axis=0)) if len(sizes) else (0,) * (nt.dim() - 1)
    shape = (len(sizes), *top) if shape is None else tuple(shape)
    where, valid = _grid(sizes, strides, offsets, shape)
    flat = _flat(nt)
    pad = jnp.asarray(padding, dtype=jnp.float64 if jnp.issubdtype(flat.dtype, jnp.inexact) else jnp.int64)
    return _pad_program()(flat, where, valid, pad), valid


def nested_from(flat: jax.Array, sizes: np.ndarray) -> torch.Tensor:
    """A new contiguous nested tensor over the buffer `flat` with components of `sizes`."""
    sizes = np.asarray(sizes, dtype=np.int64)
    strides = np.ones_like(sizes)
    for d in range(sizes.shape[1] - 2, -1, -1):
        strides[:, d] = strides[:, d + 1] * sizes[:, d + 1]
    counts = np.prod(sizes, axis=1)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    view = aten._nested_view_from_buffer.default._handle
    return view.redispatch_boxed(_CPU, tensor.wrap(flat), *(torch.from_numpy(a) for a in (sizes, strides, offsets)))


# --- the encoder's fast path -----------------------------------------------------------------------


def _check_mask(t, mask):
    if mask.dtype != torch.bool:
        raise RuntimeError(f"Expected mask to be of type bool, got {dtypes.scalar_name(mask.dtype)}")
    if mask.dim() != 2:
        raise RuntimeError("Padding mask should be 2D")
    if t.dim() != 3:
        raise RuntimeError("Input should be a 3D tensor, N * L * D")
    if tuple(mask.shape) != tuple(t.shape[:2]):
        raise RuntimeError("Mask size should match input size")


@jitted
def _mask_lengths():
    def run(mask):
        lengths = jnp.sum(mask, axis=1)
        first_gap = jnp.argmin(jnp.concatenate([mask, jnp.zeros((mask.shape[0], 1), bool)], axis=1), axis=1)
        return lengths, jnp.all(lengths == first_gap)

    return run


@register(aten._nested_tensor_from_mask_left_aligned.default)
def nested_tensor_from_mask_left_aligned(t, mask):
    _check_mask(t, mask)
    return bool(_mask_lengths()(J(mask))[1])


@register(aten._nested_tensor_from_mask.default)
def nested_tensor_from_mask(t, mask, mask_check=True):
    _check_mask(t, mask)
    lengths, aligned = (np.asarray(a) for a in _mask_lengths()(J(mask)))
    if mask_check and not aligned:
        raise RuntimeError("Mask must be left-aligned without gaps")
    batch, length, width = t.shape
    sizes = np.stack([lengths, np.full_like(lengths, width)], axis=1).astype(np.int64)
    valid = np.arange(length)[None, :, None] < lengths[:, None, None]
    where = np.flatnonzero(np.broadcast_to(valid, (batch, length, width)))
    return nested_from(_pack_program()(J(t), where), sizes)


def nested_encoder_layer(src, embed_dim, num_heads, *rest, mask=None, mask_type=None):
    """_transformer_encoder_layer_fwd on a nested batch: the layer on the padded batch, its padding
    hidden from every query as a key padding mask, and the components packed back."""
    weights, use_gelu, norm_first, eps, mask, _ = encoder_layer.encoder_arguments(rest, mask, mask_type)
    if mask is not None:
        raise RuntimeError("NestedTensor with mask is not supported yet")
    sizes = _metadata(src)[0]
    if sizes.ndim != 2 or sizes.shape[1] != 2 or np.any(sizes[:, 1] != embed_dim):
        raise RuntimeError(f"expected a nested tensor of (length, {embed_dim}) components")
    if src.size(0) == 0 or not sizes[:, 0].any():
        return src.clone()
    batch, valid = padded(src, 0.0)
    program = encoder_layer.layer_program(src.dtype, embed_dim, num_heads, use_gelu, norm_first, eps, 1)
    out = program(batch, *encoder_layer.layer_arrays(weights), jnp.asarray(~valid[:, :, 0]))
    return nested_from(_pack_program()(out, np.flatnonzero(valid)), sizes)


def to_padded_tensor(self, padding, output_size=None):
    sizes = _metadata(self)[0]
    shape = None
    if output_size is not None:
        if len(output_size) != self.dim():
            raise RuntimeError("Length of output_size does not match NestedTensor dims. Broadcasting is not supported.")
        if len(sizes) and (output_size[0] < len(sizes) or np.any(np.asarray(output_size[1:]) < sizes.max(axis=0))):
            raise RuntimeError(
                "Value in output_size is less than NestedTensor padded size. Truncation is not supported."
            )
        shape = tuple(output_size)
    return tensor.wrap(padded(self, padding, shape)[0])


# --- attention on nested tensors, component by component ------------------------------------------
# What scaled_dot_product_attention's math path runs on them (jagged tensors convert to these on jax):
# each component is a dense jax array, computed as the dense op computes it.


def _parts(nt) -> list[jax.Array]:
    return [J(t) for t in aten.unbind.int._handle.redispatch_boxed(_NESTED_CPU, nt, 0)]


def _nested_of(parts: list[jax.Array]) -> torch.Tensor:
    sizes = np.array([p.shape for p in parts], dtype=np.int64).reshape(len(parts), -1)
    return nested_from(jnp.concatenate([p.reshape(-1) for p in parts]), sizes)


def _component_dim(nt, dim: int) -> int:
    dim = dim % nt.dim()
    if dim == 0:
        raise RuntimeError("softmax over the batch dimension of a nested tensor is not supported")
    return dim - 1


def nested_mul_scalar(self, other):
    jdt = dtypes.to_jax_dtype(torch.result_type(self, other))
    return _nested_of([(p * other).astype(jdt) for p in _parts(self)])


def nested_mul_tensor(self, other):
    """A nested tensor times a number (a 0-dim tensor) or a nested tensor of the same components; other
    forms run on CPU under the fallback's policy."""
    jdt = dtypes.to_jax_dtype(torch.result_type(self, other))
    if not isinstance(other, torch.Tensor):  # a Python number, as the dispatcher may pass it
        return nested_mul_scalar(self, other)
    if self.is_nested and other.is_nested and self.size(0) == other.size(0):
        return _nested_of([(a * b).astype(jdt) for a, b in zip(_parts(self), _parts(other))])
    nested, number = (self, other) if self.is_nested else (other, self)
    if number.dim() == 0:
        value = J(number) if tensor.is_jax(number) else number.item()
        return _nested_of([(p * value).astype(jdt) for p in _parts(nested)])
    return nested_fallback(aten.mul.Tensor, self, other)


def nested_matmul(self, other):
    if not (self.is_nested and other.is_nested and self.size(0) == other.size(0)):
        raise RuntimeError("matmul of jax nested tensors takes two nested tensors of as many components")
    jdt = dtypes.to_jax_dtype(self.dtype)
    precision, accumulate = product_precision(jdt)
    pairs = zip(_parts(self), _parts(other))
    return _nested_of([matmul(a, b, precision, accumulate).astype(jdt) for a, b in pairs])


def _softmax_of(p, axis, safe):
    c = jnp.promote_types(p.dtype, jnp.float32)
    x = p.astype(c)
    peak = jnp.max(x, axis=axis, keepdims=True)
    unseen = peak == -jnp.inf
    weights = tm.exp(x - jnp.where(unseen, 0.0, peak))
    out = weights / jnp.sum(weights, axis=axis, keepdims=True)
    return jnp.where(unseen, 0.0, out) if safe else out


def nested_safe_softmax(self, dim, dtype=None):
    jdt = dtypes.to_jax_dtype(dtype or self.dtype)
    axis = _component_dim(self, dim)
    return _nested_of([_softmax_of(p, axis, True).astype(jdt) for p in _parts(self)])


def nested_softmax(self, dim, half_to_float):
    jdt = jnp.float32 if half_to_float else dtypes.to_jax_dtype(self.dtype)
    axis = _component_dim(self, dim)
    return _nested_of([_softmax_of(p, axis, False).astype(jdt) for p in _parts(self)])


COMPONENTWISE = {
    aten.mul.Scalar: nested_mul_scalar,
    aten.mul.Tensor: nested_mul_tensor,
    aten.matmul.default: nested_matmul,
    aten._safe_softmax.default: nested_safe_softmax,
    aten._softmax.default: nested_softmax,
}


# --- everything else: CPU, under the fallback's policy ---------------------------------------------


def nested_fallback(op, *args, **kwargs):
    """Runs a nested-tensor op without a jax kernel on CPU (as the dense fallback does): counted, warned
    once, refused under JAXDEV_FALLBACK=error."""
    if fallback.mode() == "error":
        raise fallback.FallbackError(
            f"{op.name()} has no jax kernel for nested tensors (jax runs {SUPPORTED}), and "
            "JAXDEV_FALLBACK=error forbids running it on CPU"
        )
    fallback.admit(op, args, kwargs, view_of="a nested tensor", kernel="jax kernel for nested tensors")
    return fallback.round_trip(op, args, kwargs, _cpu_copy)


def _cpu_copy(x):
    """CPU's copy between devices needs a contiguous nested tensor (one buffer)."""
    return (x.contiguous() if x.is_nested else x).detach().to("cpu")


def _composites_with_nested_kernels():
    """CompositeImplicitAutograd ops with a NestedTensorCPU kernel and an AutogradNestedTensor kernel of
    their own (matmul, linear, ...). Without a kernel at NestedTensorPrivateUse1 their decomposition runs
    on the nested tensor and fails inside PyTorch ("NestedTensorImpl doesn't support sizes"); the fallback
    registered there loses no gradient, since AutogradNestedTensor keeps its own kernel."""
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        has = functools.partial(torch._C._dispatch_has_kernel_for_dispatch_key, name)
        if has("NestedTensorCPU") and has("CompositeImplicitAutograd") and _own_nested_autograd(name):
            base, _, overload = name.removeprefix("aten::").partition(".")
            yield getattr(getattr(aten, base), overload or "default")


def _own_nested_autograd(name: str) -> bool:
    table = torch._C._dispatch_dump_table(name)
    return any(line.startswith("AutogradNestedTensor:") and "[autograd kernel]" in line for line in table.splitlines())


def _on_cpu(op):
    def kernel(*args, **kwargs):
        return nested_fallback(op, *args, **kwargs)

    return kernel


def _install() -> None:
    for op in _composites_with_nested_kernels():
        if op not in METADATA and op not in COMPONENTWISE:
            register_layout_kernel(op, _on_cpu(op), NESTED)
    for op, kernel in COMPONENTWISE.items():
        register_layout_kernel(op, kernel, NESTED)
    for op in METADATA:
        register_layout_kernel(op, _redispatch(op, _NESTED_CPU), NESTED)
    register_layout_kernel(aten._transformer_encoder_layer_fwd.default, nested_encoder_layer, NESTED)
    register_layout_kernel(aten.to_padded_tensor.default, to_padded_tensor, NESTED)
    _FALLBACK_LIB.fallback(nested_fallback, NESTED)


_install()
