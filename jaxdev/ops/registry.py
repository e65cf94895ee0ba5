"""The one place where jax kernels are registered with PyTorch's dispatcher.

Tables, keyed by qualified overload name ("aten::add.Tensor"):
  KERNELS   the Python kernel registered at PrivateUse1
  AUTOGRAD  the kernel registered at AutogradPrivateUse1, where one comes with it
  DERIVED   in-place / out= overloads derived from a functional kernel -> that functional overload

`register` refuses a CompositeImplicitAutograd op without an autograd kernel: a PrivateUse1 kernel
takes the op's decomposition away from AutogradPrivateUse1, and its gradients are then silently lost
(the origin bug of this project).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import torch
from torch._ops import OpOverload

from jaxdev import dtypes, tensor
from jaxdev.tensor import is_jax

aten = torch.ops.aten

KERNELS: dict[str, Callable] = {}
AUTOGRAD: dict[str, Callable] = {}
DERIVED: dict[str, str] = {}

_LIB = torch.library.Library("aten", "IMPL")


class RegistrationError(RuntimeError):
    pass


def is_composite_implicit(op: OpOverload) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")


def register(*ops: OpOverload, autograd: Callable | None = None):
    """Decorator: `fn` becomes the PrivateUse1 kernel of each op (it receives torch tensors)."""

    def deco(fn):
        for op in ops:
            _register(op, fn, autograd)
        return fn

    return deco


def _register(op: OpOverload, fn: Callable, autograd: Callable | None) -> None:
    name = op.name()
    if is_composite_implicit(op) and autograd is None:
        raise RegistrationError(
            f"refusing to register {name} at PrivateUse1: it is CompositeImplicitAutograd, and a "
            "backend kernel would replace its decomposition under AutogradPrivateUse1 so its "
            "gradients would be silently lost; let it decompose, or pass autograd=<kernel>"
        )
    if name in KERNELS:
        raise RegistrationError(f"{name} already has a jax kernel ({KERNELS[name].__qualname__})")
    _LIB.impl(op, fn, "PrivateUse1")
    KERNELS[name] = fn
    if autograd is not None:
        _LIB.impl(op, autograd, "AutogradPrivateUse1")
        AUTOGRAD[name] = autograd


# --- in-place and out= variants derived from a functional kernel ---------------------------------


def check_cast(result: torch.dtype, target: torch.dtype) -> None:
    if not torch.can_cast(result, target):
        raise RuntimeError(
            f"result type {dtypes.scalar_name(result)} can't be cast to the desired output "
            f"type {dtypes.scalar_name(target)}"
        )


def store_into(out: torch.Tensor, value: jax.Array, *, resize: bool) -> torch.Tensor:
    """Write a result into an existing tensor (in-place or out=), with PyTorch's checks."""
    if not is_jax(out):
        raise tensor.mixed_devices(out.device)
    check_cast(dtypes.to_torch_dtype(value.dtype), out.dtype)
    shape = tuple(value.shape)
    if tuple(out.shape) != shape:
        if not resize:
            raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape {list(shape)}")
        if out.numel() != 0:
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
    tensor.write(out, value)
    return out


def _out_args(op: OpOverload) -> list[str]:
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
        if _out_args(candidate) and _same_inputs(op, candidate):
            return candidate
    return None


def inplace_variant(op: OpOverload) -> OpOverload | None:
    packet = getattr(aten, op._schema.name.split("::")[1] + "_", None)
    if packet is None or op._overloadname not in packet.overloads():
        return None
    return getattr(packet, op._overloadname)


def register_functional(*ops: OpOverload, inplace: bool = True, out: bool = True):
    """Decorator for `fn(*args, **kwargs) -> jax.Array | tuple[jax.Array, ...]`.

    Registers the functional overloads, and derives their in-place (`op_`) and out= overloads:
    those compute the same values, check that the result can be cast to the destination's dtype
    and write it through the destination's strides, so aliases see it.
    """

    def deco(fn):
        for op in ops:
            _register(op, _functional_kernel(fn), None)
            ip = inplace_variant(op) if inplace else None
            if ip is not None:
                _register(ip, _inplace_kernel(fn), None)
                DERIVED[ip.name()] = op.name()
            ov = out_variant(op) if out else None
            if ov is not None:
                _register(ov, _out_kernel(fn, _out_args(ov)), None)
                DERIVED[ov.name()] = op.name()
        return fn

    return deco


def _wrap_result(r):
    if isinstance(r, tuple):
        return tuple(None if a is None else tensor.wrap(a) for a in r)
    return tensor.wrap(r)


def _functional_kernel(fn):
    def kernel(*args, **kwargs):
        return _wrap_result(fn(*args, **kwargs))

    kernel.__qualname__ = fn.__qualname__
    return kernel


def _tensor_args(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, torch.Tensor))


def _inplace_kernel(fn):
    def kernel(self, *args, **kwargs):
        tensor.check_no_partial_overlap(self, _tensor_args(args, kwargs))
        store_into(self, fn(self, *args, **kwargs), resize=False)
        return self

    kernel.__qualname__ = fn.__qualname__ + "_"
    return kernel


def _out_kernel(fn, out_names):
    def kernel(*args, **kwargs):
        outs = [kwargs.pop(n) for n in out_names]
        for o in outs:
            tensor.check_no_partial_overlap(o, _tensor_args(args, kwargs))
        r = fn(*args, **kwargs)
        rs = r if isinstance(r, tuple) else (r,)
        for o, v in zip(outs, rs):
            store_into(o, v, resize=True)
        return tuple(outs) if len(outs) > 1 else outs[0]

    kernel.__qualname__ = fn.__qualname__ + ".out"
    return kernel
