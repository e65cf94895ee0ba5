"""Kernels derived from a functional kernel's body (registry.register_functional): the in-place
(`op_`) and out= variants, which compute the same values, check that they can be cast to the
destination's dtype and write them through its strides so that aliases see them (`store_into`), and
JAX's broadcasting errors raised as PyTorch's."""

from __future__ import annotations

import warnings

import jax
import torch
from torch._ops import OpOverload

from jaxdev import dtypes, layout, tensor, tracing
from jaxdev.ops.kit import indexed_writes, inplace, out_dtypes, overlaps
from jaxdev.tensor import is_jax

aten = torch.ops.aten


def check_cast(result: torch.dtype, target: torch.dtype) -> None:
    if not torch.can_cast(result, target):
        raise RuntimeError(
            f"result type {dtypes.scalar_name(result)} can't be cast to the desired output "
            f"type {dtypes.scalar_name(target)}"
        )


def store_into(out: torch.Tensor, value: jax.Array, *, resize: bool, strides=None, warn: bool = True) -> torch.Tensor:
    """Write a result into an existing tensor (in-place or out=), with PyTorch's checks. `strides`: the
    layout a resized out= takes (TensorIterator restrides the outputs it resizes as its inputs lie);
    `warn`: whether resizing a non-empty out warns (resize_output does, a kernel's own resize_ does not)."""
    if not is_jax(out):
        raise tensor.mixed_devices(out.device)
    check_cast(dtypes.to_torch_dtype(value.dtype), out.dtype)
    shape = tuple(value.shape)
    if tuple(out.shape) != shape:
        if not resize:
            raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape {list(shape)}")
        if warn and out.numel() != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out.shape)}, which does not match the required output shape {list(shape)}. "
                "This behavior is deprecated, and in a future PyTorch release outputs will not be "
                "resized unless they have zero elements. You can explicitly reuse an out tensor t "
                "by resizing it, inplace, to zero elements with t.resize_(0).",
                UserWarning,
                stacklevel=2,
            )
        out.resize_(shape)
        if strides is not None and tuple(strides) != out.stride():
            out.as_strided_(shape, strides)
    tensor.write(out, value)
    return out


def out_args(op: OpOverload) -> list[str]:
    return [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _same_inputs(a: OpOverload, b: OpOverload) -> bool:
    strip = lambda op: [
        (x.name, str(x.type))
        for x in op._schema.arguments
        if not (x.alias_info and x.alias_info.is_write and x.kwarg_only)
    ]
    return strip(a) == strip(b)


def out_variant(op: OpOverload) -> OpOverload | None:
    packet = getattr(aten, op._schema.name.split("::")[1])
    for overload in packet.overloads():
        candidate = getattr(packet, overload)
        if out_args(candidate) and _same_inputs(op, candidate):
            return candidate
    return None


def inplace_variant(op: OpOverload) -> OpOverload | None:
    packet = getattr(aten, op._schema.name.split("::")[1] + "_", None)
    if packet is None or op._overloadname not in packet.overloads():
        return None
    return getattr(packet, op._overloadname)


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """TensorIterator's broadcast of the operands' shapes, in order, with its error (infer_size)."""
    out: tuple[int, ...] = ()
    for b in shapes:
        a, n = out, max(len(out), len(b))
        res = []
        for i in reversed(range(n)):  # from the last dim, as infer_size: its error names the last mismatch
            x = a[i - n + len(a)] if i - n + len(a) >= 0 else 1
            y = b[i - n + len(b)] if i - n + len(b) >= 0 else 1
            if x != y and x != 1 and y != 1:
                raise RuntimeError(
                    f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton dimension {i}"
                )
            res.append(y if x == 1 else x)
        out = tuple(reversed(res))
    return out


def as_shape_error(e: TypeError | ValueError, args, kwargs) -> RuntimeError | None:
    """JAX's broadcasting error as PyTorch's RuntimeError: CPU's message where the tensor arguments
    do not broadcast, else JAX's first line. None: not a broadcasting error."""
    text = str(e)
    if "broadcast" not in text:
        return None
    broadcast_shapes(*(tuple(t.shape) for t in tensor_args(args, kwargs)))
    return RuntimeError(text.splitlines()[0] if text else type(e).__name__)


def shape_errors_as_torch(fn):
    """`fn` raising JAX's broadcasting errors (TypeError/ValueError) as PyTorch's RuntimeError."""

    def body(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as e:
            error = as_shape_error(e, args, kwargs)
            if error is None:
                raise
            raise error from None

    body.__qualname__ = fn.__qualname__
    body.__name__ = getattr(fn, "__name__", "kernel")
    return body


def tensor_args(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, torch.Tensor))


def inplace_kernel(fn, functional: OpOverload, op: OpOverload, indexed: bool = False):
    donating = inplace.eligible(functional, op)  # pointwise: large ones compute into self's own buffer
    name = op.name()
    overlap_check = overlaps.written_check(op, after_self=True)
    fills = overlaps.fills_expanded(op)

    def kernel(self, *args, **kwargs):
        if overlap_check is None:
            tensor.check_no_partial_overlap(self, tensor_args(args, kwargs))
        else:
            overlap_check(self, args, kwargs)
        if fills and overlaps.expanded_dims(self):
            overlaps.write_expanded(op, self, fn, args, kwargs, store_into)
            return self
        if donating and is_jax(self) and inplace.try_donated(fn, name, self, args, kwargs):
            return self
        if indexed:  # the rows written, in self's own buffer where it may be given
            value = indexed_writes.computed(fn, self, args, kwargs, tensor_args(args, kwargs))
        else:
            value = fn(self, *args, **kwargs)
        store_into(self, value, resize=False)
        return self

    kernel.__qualname__ = fn.__qualname__ + "_"
    return kernel


# Ops whose CPU out= kernel is neither structured nor a TensorIterator: it resizes out contiguous
# (resize_output), whatever layout the functional result has (found by running every OpInfo with an
# out= variant on transposed and channels_last inputs into an empty out, CPU against jax).
_CONTIGUOUS_OUT = frozenset({"aten::native_batch_norm", "aten::isin", "aten::flip"})
# Ops whose CPU out= kernel resizes out with resize_ rather than resize_output, so a non-empty out of
# the wrong shape is resized without the deprecation warning (every OpInfo with out= probed: CPU was
# silent for 10 of 359, jax warned for these two of them; PyTorch's test_out_warning xfails them)
_SILENT_RESIZE = frozenset({"aten::multinomial", "aten::log_sigmoid_forward"})


def out_kernel(fn, out_names, op: OpOverload, out_op: OpOverload):
    # A resized out= takes the layout of the functional result (structured kernels restride it so, and
    # TensorIterator lays it out as its inputs lie), except where CPU's out= kernel resizes it contiguous
    laid_out = op._schema.name not in _CONTIGUOUS_OUT
    warn = op._schema.name not in _SILENT_RESIZE
    overlap_check = overlaps.written_check(out_op, after_self=False)

    def kernel(*args, **kwargs):
        outs = [kwargs.pop(n) for n in out_names]
        for o in outs:
            if overlap_check is None:
                tensor.check_no_partial_overlap(o, tensor_args(args, kwargs))
            else:
                overlap_check(o, args, kwargs)
        r = fn(*args, **kwargs)
        rs = r if isinstance(r, tuple) else (r,)
        out_dtypes.check(out_op.name(), op.name(), outs, rs, args)
        inputs = list(tensor_args(args, kwargs))
        layouts = None
        for i, (o, v) in enumerate(zip(outs, rs)):
            # An out= that is also an input is never resized (TensorIterator's read-write rule):
            # `x.ldexp_(y)` is mul(x, 2**y, out=x), which raises when y broadcasts x bigger.
            resize = not any(o is a for a in inputs)
            strides = None
            if resize and laid_out and tuple(o.shape) != tuple(v.shape):
                # (x.t() + 1, torch.sort(x.t()), cat or upsample of channels_last inputs into an empty out)
                layouts = layouts or layout.result_layouts(op, args, kwargs, tracing.compiled_layout(v)) or ()
                laid = layouts[i] if i < len(layouts) else None
                strides = laid[1] if laid is not None and laid[0] == tuple(v.shape) else None
            store_into(o, v, resize=resize, strides=strides, warn=warn)
        return tuple(outs) if len(outs) > 1 else outs[0]

    kernel.__qualname__ = fn.__qualname__ + ".out"
    return kernel
