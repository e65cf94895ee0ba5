"""How the registry installs an op's native kernel (jaxdev/csrc/native.cpp): the Python kernel as its
slow path under the op's own schema (`slow_path`), and an elementwise op's fast path, which runs its
per-dtype jitted bodies without a Python frame (`fast_kernel`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import OpOverload

from jaxdev import native

# The Python kernels of ops that have a native fast kernel (`register_functional(..., fast=...)`) are
# registered here, under the op's own schema, as the native kernel's slow path.
_SLOW_LIB = torch.library.Library("jaxdev_slow", "DEF")


def slow_path(op: OpOverload, fn: Callable, install: Callable[[str], None]) -> None:
    """`fn` registered under `op`'s own schema as jaxdev_slow::<op>, the slow path of the native
    PrivateUse1 kernel that `install(slow_name)` registers for `op`."""
    short = op.name().removeprefix("aten::")
    _SLOW_LIB.define(str(op._schema).removeprefix("aten::"))
    _SLOW_LIB.impl(short, fn, "PrivateUse1")
    install("jaxdev_slow::" + short)


def fast_kernel(op: OpOverload, bodies: Callable) -> Callable[[str], None]:
    """Installs register_fast_kernel (jaxdev/csrc/native.cpp): plain jax tensors of one dtype, other
    arguments at their defaults, are computed by `bodies(dtype)(*arrays)` without a Python frame."""
    tensors = 0
    for argument in op._schema.arguments:
        if str(argument.type) != "Tensor" or argument.kwarg_only:
            break
        tensors += 1
    short = op.name().removeprefix("aten::")
    return lambda slow: native.module.register_fast_kernel(short, slow, tensors, bodies)
