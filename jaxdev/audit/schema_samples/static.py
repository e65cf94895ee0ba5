"""Overloads that cannot be tried directly by construction (parent side: needs torch, runs nothing)."""

from __future__ import annotations

from jaxdev.audit.facts import arguments
from jaxdev.audit.facts.aten import HOST_ONLY, SPARSE_NAMES, SPARSE_WORDS, UNBUILDABLE, UNTRIABLE


def static_untriable(name: str) -> tuple[str, str] | None:
    """(category, reason) when the overload cannot be tried by construction; None when it can."""
    import torch

    from jaxdev.audit import dispatch

    short = name.split("::", 1)[1]
    base = short.split(".")[0]
    op = dispatch.overload(name)
    if op is None:
        return "python", UNTRIABLE["python"]

    def has(key: str) -> bool:
        return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)

    if not torch._C._dispatch_has_schema(name) if hasattr(torch._C, "_dispatch_has_schema") else False:
        return "python", UNTRIABLE["python"]
    dense = any(
        has(k)
        for k in (
            "CPU",
            "CompositeExplicitAutograd",
            "CompositeExplicitAutogradNonFunctional",
            "CompositeImplicitAutograd",
        )
    )
    sparse_keys = any(has(k) for k in ("SparseCPU", "SparseCsrCPU", "SparseMeta", "SparseCsrMeta"))
    if (sparse_keys and not dense) or any(w in base for w in SPARSE_WORDS) or base in SPARSE_NAMES:
        return "sparse", UNTRIABLE["sparse"] + f" ({base})"
    if "nested" in base:
        return "nested", UNTRIABLE["nested"] + f" ({base})"
    if base in HOST_ONLY:
        return "host_only", UNTRIABLE["host_only"]
    schema = str(op._schema)
    quant_name = ("quantize" in base and "fake_quantize" not in base) or base.startswith(("q_", "_make_per_"))
    if quant_name or base in ("int_repr", "qscheme") or (has("QuantizedCPU") and not dense) or "QScheme" in schema:
        return "quantized", UNTRIABLE["quantized"] + f" ({base})"
    if not dense:
        keys = [k for k in ("CUDA", "MPS", "MkldnnCPU", "XPU", "Meta") if has(k)]
        return "no_cpu_kernel", UNTRIABLE["no_cpu_kernel"] + (f": {', '.join(keys)}" if keys else "")
    hinted = arguments.hinted_types(base) if any(u in str(op._schema) for u in UNBUILDABLE) else {}
    for a in op._schema.arguments:
        t = str(a.real_type)
        if any(u in t for u in UNBUILDABLE) and t not in hinted.get(a.name, ()):
            return "argument", f"{UNTRIABLE['argument']}: {a.name} is {t}"
    args = op._schema.arguments
    if not any("Tensor" in str(a.real_type) or "Device" in str(a.real_type) for a in args):
        return "no_tensor", UNTRIABLE["no_tensor"]
    return None
