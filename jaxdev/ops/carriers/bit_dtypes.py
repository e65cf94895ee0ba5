"""Dtypes jax tensors hold as raw bytes: bits1x8, bits2x4, bits4x2, bits8, bits16, float4_e2m1fn_x2.

JAX has no type for them, and CPU PyTorch gives them no arithmetic either: only ops that move bytes
(empty, zero_, copies between tensors of the same dtype and across devices, clone, cat, index_select,
where, repeat, roll; float4_e2m1fn_x2 also compares byte for byte with eq/ne; flip where CPU's loop copies
whole rows, SERVED_WHEN) and views. So a jax tensor of such a dtype
lies over a storage whose box holds uint8 (uint16 for bits16, dtypes.BYTE_CARRIERS; core/boxes.empty
makes it so), and the ops in BYTE_OPS run their own kernel on aliases of the carrier dtype, their
results labelled back. Every other op reads such a tensor through dtypes.to_jax_dtype, which refuses
it in one sentence, as CPU's kernels refuse it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import tensor_iterator

_FLOAT4 = frozenset({torch.float4_e2m1fn_x2})

# op -> (the arguments holding the bytes moved, by position or keyword name, which must all have the one
# raw dtype; the raw dtypes CPU serves the op for, None: all of them)
BYTE_OPS: dict[str, tuple[tuple, frozenset | None]] = {
    "aten::zero_": ((0,), None),
    "aten::clone": ((0,), None),
    "aten::_to_copy": ((0,), None),
    "aten::copy_": ((0, 1), None),
    "aten::_copy_from": ((0, 1), None),
    "aten::_copy_from_and_resize": ((0, 1), None),
    "aten::cat": ((0,), None),
    "aten::cat.out": ((0, "out"), None),
    "aten::index_select": ((0,), None),
    "aten::repeat": ((0,), None),
    "aten::roll": ((0,), None),
    "aten::where.self": ((1, 2), None),
    "aten::eq.Tensor": ((0, 1), _FLOAT4),
    "aten::ne.Tensor": ((0, 1), _FLOAT4),
    "aten::flip": ((0,), None),
}


def flip_copies_rows(args, kwargs) -> bool:
    """CPU's flip of a raw dtype: a copy where it flips nothing (no flipped dim longer than 1 and not
    broadcast, or at most one element), else its row-copy loop, which needs TensorIterator's innermost
    dim unflipped and contiguous in both the result and self; any other case is its per-dtype kernel."""
    self, dims = args[0], args[1] if len(args) > 1 else kwargs["dims"]
    n = self.dim()
    if any(not -max(n, 1) <= d < max(n, 1) for d in dims):
        return True  # the kernel raises flip's own error first
    flipped = {d % n for d in dims if self.shape[d % n] > 1 and self.stride(d % n) != 0} if n else set()
    if not flipped or self.numel() <= 1:
        return True
    strides = self.stride()
    out = strides if tensor.is_non_overlapping_and_dense(self) else _dense_like(self.shape, strides)
    dummy = [-s if d in flipped else s for d, s in enumerate(strides)]
    _, (o, i, f) = tensor_iterator.loop_layout(self.shape, [out, strides, dummy])
    return f[0] >= 0 and o[0] == 1 and i[0] == 1


def _dense_like(shape, strides) -> list[int]:
    """empty_like's strides for a tensor that is not dense (infer_dense_strides): dense, in the order of
    self's strides, TensorIterator's sort."""
    out, step = [0] * len(shape), 1
    for d in tensor_iterator.reordered(shape, [strides]):
        out[d] = step
        step *= max(shape[d], 1)
    return out


def _cat_copies(args, kwargs) -> bool:
    """CPU's cat of float4_e2m1fn_x2 (a floating type to cat) takes its serial kernel, which has no
    float4 case, where the dim is not 0, every input is contiguous in the result's memory format and
    the result is small (under 32768 elements, or one thread); elsewhere it copies (bits never go there)."""
    tensors = [t for t in args[0] if isinstance(t, torch.Tensor)]
    if not tensors or tensors[0].dtype not in _FLOAT4 or any(t.dim() == 1 and t.numel() == 0 for t in tensors):
        return True
    ndim, dim = tensors[0].dim(), args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not -ndim <= dim < ndim or dim % ndim == 0:
        return True  # (cat's own error comes first)
    formats = {_suggested_format(t) for t in tensors}
    layout = formats.pop() if len(formats) == 1 else torch.contiguous_format
    numel = sum(t.numel() for t in tensors)
    small = numel < 32768 or torch.get_num_threads() == 1
    return not (small and all(t.is_contiguous(memory_format=layout) for t in tensors))


def _suggested_format(t: torch.Tensor) -> torch.memory_format:
    """suggest_memory_format, near enough: channels-last where a 4-d (5-d) tensor is laid out so and not
    plainly contiguous."""
    for ndim, layout in ((4, torch.channels_last), (5, torch.channels_last_3d)):
        if t.dim() == ndim and not t.is_contiguous() and t.is_contiguous(memory_format=layout):
            return layout
    return torch.contiguous_format


# op -> (served(args, kwargs) for a raw dtype, else CPU's NotImplementedError from the kernel named)
SERVED_WHEN: dict[str, tuple[Callable, str]] = {
    "aten::flip": (flip_copies_rows, "flip_cpu"),
    "aten::cat": (_cat_copies, "cat_serial_kernel"),
    "aten::cat.out": (_cat_copies, "cat_serial_kernel"),
}


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return (value,)
    return tuple(v for v in value if isinstance(v, torch.Tensor)) if isinstance(value, (list, tuple)) else ()


def _argument(args, kwargs, where):
    return (args[where] if where < len(args) else None) if isinstance(where, int) else kwargs.get(where)


def _raw_dtype(args, kwargs, positions):
    """The raw dtype of the byte-holding arguments (or of a dtype= argument), or None: the hot path of
    every call of these ops (about a microsecond for cat of two tensors)."""
    carriers = dtypes.BYTE_CARRIERS
    for where in positions:
        if type(where) is int:
            if where >= len(args):
                continue
            value = args[where]
        else:
            value = kwargs.get(where)
        if isinstance(value, torch.Tensor):
            if value.dtype in carriers:
                return value.dtype
        elif isinstance(value, (list, tuple)):
            for t in value:
                if isinstance(t, torch.Tensor) and t.dtype in carriers:
                    return t.dtype
    dtype = kwargs.get("dtype") if kwargs else None
    return dtype if dtype in carriers else None


def retyped(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of `dtype` (same item size) over t's storage, sizes, strides and offset: not a view of t
    (no `_base`), as a new result must be."""
    if tensor.is_jax(t):
        return tensor.tensor_on_storage(t.untyped_storage(), dtype, tuple(t.shape), t.stride(), t.storage_offset())
    out = torch.empty((0,), dtype=dtype, device=t.device)
    return out.set_(t.untyped_storage(), t.storage_offset(), t.shape, t.stride())


def _refuse(name: str, raw: torch.dtype, other: torch.dtype) -> dtypes.RawBytesDtypeError:
    return dtypes.RawBytesDtypeError(
        f"{name.removeprefix('aten::')} between {other} and {raw} is not supported: {raw} holds raw bits, which "
        "move only between tensors of that same dtype (as on CPU)"
    )


def _on_bytes(fn: Callable, name: str, raw: torch.dtype, args, kwargs):
    positions, only = BYTE_OPS[name]
    if only is not None and raw not in only:
        dtypes.to_jax_dtype(raw)  # raises: CPU serves this op for other raw dtypes only
    served, kernel = SERVED_WHEN.get(name, (None, ""))
    if served is not None and not served(args, kwargs):
        label = dtypes.name(raw)
        raise dtypes.RawBytesDtypeError(f"\"{kernel}\" not implemented for '{label[0].upper() + label[1:]}'")
    carrier = dtypes.BYTE_CARRIERS[raw]
    originals: dict[int, torch.Tensor] = {}

    def as_carrier(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.dtype is not raw:
            raise _refuse(name, raw, t.dtype)
        alias = retyped(t, carrier)
        originals[id(alias)] = t
        return alias

    args, kwargs = list(args), dict(kwargs)
    for where in positions:
        value = _argument(args, kwargs, where)
        value = [as_carrier(t) for t in value] if isinstance(value, (list, tuple)) else as_carrier(value)
        if isinstance(where, int) and where < len(args):
            args[where] = value
        elif not isinstance(where, int) and where in kwargs:
            kwargs[where] = value
    if "dtype" in kwargs and kwargs["dtype"] is not None:
        if kwargs["dtype"] is not raw:
            raise _refuse(name, raw, kwargs["dtype"])
        kwargs["dtype"] = carrier

    def labelled(r):
        if isinstance(r, (tuple, list)):
            return type(r)(labelled(x) for x in r)
        if not isinstance(r, torch.Tensor):
            return r
        if id(r) in originals:
            return originals[id(r)]  # an in-place op returns its own argument
        return retyped(r, raw) if r.dtype is carrier else r

    return labelled(fn(*args, **kwargs))


def serving_bytes(op, fn: Callable) -> Callable:
    """`fn`, serving the raw dtypes too when `op` is one in BYTE_OPS (one dtype test per byte-holding
    argument otherwise)."""
    name = op.name()
    spec = BYTE_OPS.get(name)
    if spec is None:
        return fn
    positions = spec[0]

    def kernel(*args, **kwargs):
        raw = _raw_dtype(args, kwargs, positions)
        if raw is None:
            return fn(*args, **kwargs)
        return _on_bytes(fn, name, raw, args, kwargs)

    kernel.__qualname__ = fn.__qualname__
    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__wrapped__ = fn
    return kernel
