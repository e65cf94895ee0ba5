"""How the registry installs an op's native kernel (jaxdev/csrc/native.cpp): the Python kernel as its
slow path under the op's own schema (`slow_path`), and an elementwise op's fast path, which runs its
per-dtype jitted bodies without a Python frame (`fast_kernel`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import OpOverload

from jaxdev import native

# The Python kernels of ops that have a native kernel (`register_functional(..., fast=...)`, a memo
# kernel: kit/memo.py) are registered here, under the op's own schema, as the native kernel's slow path:
# in jaxdev_slow, or in jaxdev_memo below a fast kernel whose slow path (jaxdev_slow) is a memo kernel.
_LIBS: dict[str, torch.library.Library] = {}


def defined(op: OpOverload, namespace: str = "jaxdev_slow") -> str:
    """`op`'s schema defined in `namespace`: its qualified name there ("jaxdev_slow::add.Tensor")."""
    if namespace not in _LIBS:
        _LIBS[namespace] = torch.library.Library(namespace, "DEF")
    _LIBS[namespace].define(str(op._schema).removeprefix("aten::"))
    return f"{namespace}::{op.name().removeprefix('aten::')}"


def slow_path(op: OpOverload, fn: Callable, install: Callable[[str], None], namespace: str = "jaxdev_slow") -> None:
    """`fn` registered under `op`'s own schema as <namespace>::<op>, the slow path of the native
    PrivateUse1 kernel that `install(slow_name)` registers for `op`."""
    name = defined(op, namespace)
    _LIBS[namespace].impl(name.split("::", 1)[1], fn, "PrivateUse1")
    install(name)


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
