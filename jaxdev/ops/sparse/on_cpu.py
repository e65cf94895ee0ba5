"""Every other sparse op runs on CPU through the CPU fallback's policy (JAXDEV_FALLBACK: counted,
warned, or refused), never reaching a dispatcher error."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from jaxdev import fallback, tensor
from jaxdev.ops.sparse.components import needs_cpu, unsupported_layout

_FALLBACK_LIB = torch.library.Library("_", "IMPL")


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
        raise needs_cpu(op, layout)
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


_FALLBACK_LIB.fallback(sparse_fallback, "SparsePrivateUse1")
_FALLBACK_LIB.fallback(sparse_fallback, "SparseCsrPrivateUse1")
