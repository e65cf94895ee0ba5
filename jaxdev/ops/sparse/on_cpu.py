"""Every other sparse op runs on CPU through the CPU fallback's policy (JAXDEV_FALLBACK: counted,
warned, or refused), never reaching a dispatcher error."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from jaxdev import fallback
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
    cpu_key = "SparseCPU" if layout == torch.sparse_coo else "SparseCsrCPU"
    if not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), cpu_key):
        # (as_strided, view, unfold: every view of a sparse tensor but those CPU computes from its parts)
        raise NotImplementedError(
            f"Could not run '{op.name()}' with arguments from the '{cpu_key.replace('CPU', 'PrivateUse1')}' "
            f"backend: CPU PyTorch has no kernel for it on {str(layout).removeprefix('torch.')} tensors either"
        )
    if fallback.mode() == "error":
        raise needs_cpu(op, layout)
    fallback.admit(
        op,
        args,
        kwargs,
        view_of=f"a {str(layout).removeprefix('torch.')} tensor",
        kernel="jax kernel for sparse tensors",
    )
    return fallback.round_trip(op, args, kwargs, _cpu_copy)


def _cpu_copy(x):
    """A sparse tensor's CPU copy; a strided one's cloned, so CPU's kernel never writes a shared buffer."""
    return x.detach().to("cpu") if x.layout != torch.strided else x.detach().to("cpu").clone()


_FALLBACK_LIB.fallback(sparse_fallback, "SparsePrivateUse1")
_FALLBACK_LIB.fallback(sparse_fallback, "SparseCsrPrivateUse1")
