"""Values given to a direct trial's arguments: an argument builder's values fitted to the
overload's schema types, and captured or built values placed on the trial's device."""

from __future__ import annotations

from jaxdev.audit.facts import arguments


def fit(value, t: str):
    """(fits, value) for a hint's value and the schema type `t` of the argument (numbers and int
    lists become tensors where the overload takes a Tensor)."""
    import torch

    if isinstance(value, arguments.ByType):
        inner = t[len("Optional[") : -1] if t.startswith("Optional[") else t
        for key in (t, inner):
            if key in value.by_type:
                return True, value.by_type[key]
        return False, None
    optional = t.startswith("Optional[")
    inner = t[len("Optional[") : -1] if optional else t
    if value is None:
        return optional, None
    if isinstance(value, arguments.OnCpu):
        return inner == "Tensor", value
    if isinstance(value, arguments.StorageOf):
        return inner == "Storage", value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if inner == "Tensor":
        if isinstance(value, torch.Tensor):
            return True, value
        if number or (isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value)):
            return True, torch.tensor(value)
        return False, None
    if inner == "str":
        return isinstance(value, str), value
    if inner in ("int", "SymInt"):
        return isinstance(value, int) and not isinstance(value, bool), value
    if inner in ("float", "number"):
        return number, value
    if inner == "bool":
        return isinstance(value, bool), value
    if inner.startswith("List["):
        return isinstance(value, (list, tuple)), value
    return not isinstance(value, (str, list, tuple, torch.Tensor)), value


def fit_hint(values: dict, schema) -> dict:
    """The hint's values for the arguments this overload has, where they fit its types."""
    out = {}
    for a in schema.arguments:
        if a.name in values and not (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write):
            fits, value = fit(values[a.name], str(a.real_type))
            if fits:
                out[a.name] = value
    return out


def place(value, device: str):
    """A given argument on the trial's device (OnCpu ones stay on CPU, StorageOf gives a storage)."""
    if isinstance(value, arguments.OnCpu):
        return to(value.value, "cpu")
    if isinstance(value, arguments.StorageOf):
        return to(value.tensor, device).untyped_storage()
    return to(value, device)


def to(value, device: str):
    """A captured argument for `device`: tensors copied there (fresh copies: ops write into them)."""
    import torch
    from torch.utils._pytree import tree_map

    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().clone().to(device)
        if isinstance(x, torch.device):
            return torch.device(device)
        if isinstance(x, torch.UntypedStorage):  # a copy of its bytes on `device`
            as_bytes = torch.empty(0, dtype=torch.uint8, device=x.device).set_(x)
            return as_bytes.clone().to(device).untyped_storage()
        return x

    return tree_map(move, value)
