"""Donor arguments for a direct trial: the arguments a sibling overload got from PyTorch's own OpInfo
samples (captured on CPU), given to the overload by name; and the repro line of a trial."""

from __future__ import annotations

import contextlib

from jaxdev.audit.schema_samples.build import LIKE, LIKE_SIZED, builder, is_out
from jaxdev.audit.schema_samples.values import to


class _Capture:
    """A dispatch mode recording the first call of the overload `target` (its arguments by schema
    name, tensors copied) while an OpInfo sample runs on CPU."""

    def __new__(cls, target: str):
        from torch.utils._python_dispatch import TorchDispatchMode

        class Capture(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.args = None

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if self.args is None and func.name() == target:
                    named = dict(zip((a.name for a in func._schema.arguments), args))
                    named.update(kwargs)
                    self.args = to(named, "cpu")
                return func(*args, **kwargs)

        return Capture()


def donor_candidates(op, donors) -> list:
    """(plan, builder) from OpInfo samples: for each (overload Y, OpInfo) in `donors`, the arguments
    of Y's first call while the OpInfo's first samples run on CPU (forward, then backward),
    given to this overload by argument name (out= tensors fresh, the rest from the schema)."""
    import torch

    from jaxdev.audit import check, samples

    out = []
    for target, opinfo in donors:
        try:
            info = samples.op_db().get(opinfo)
            if info is None:
                continue
            cpu_dtypes = info.supported_dtypes("cpu")
            dtype = torch.float32 if torch.float32 in cpu_dtypes else sorted(cpu_dtypes, key=str)[0]
            captured = None
            for direction in ("forward", "backward"):
                if direction == "backward" and not info.supports_autograd:
                    continue
                unit = samples.Unit(opinfo, samples.dtype_name(dtype), direction)
                for sample in samples.samples(unit, 3):
                    capture = _Capture(target)
                    with contextlib.suppress(Exception), capture:
                        check.call(info, sample, direction == "backward")
                    if capture.args is not None:
                        captured = capture.args
                        break
                if captured is not None:
                    break
        except Exception:
            continue
        if captured is None:
            continue
        for d in (LIKE, LIKE_SIZED, None, "int64", "bool", "float32"):
            plan = ("donor", target, opinfo, d)
            outs = d if d in (LIKE, LIKE_SIZED) else tuple(d for a in op._schema.arguments if is_out(a))
            out.append((plan, builder(op, (), dtype, outs, 0, False, given=captured)))
    return out


def describe(name: str, plan, kwargs) -> str:
    """A repro line: the overload, then each argument (tensors as dtype[shape])."""
    import torch

    def show(v):
        if isinstance(v, torch.Tensor):
            return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(show(x) for x in v) + "]"
        if isinstance(v, torch.device):
            return "'jax'"  # the device argument: CPU for the reference run, jax for the trial
        if isinstance(v, torch.UntypedStorage):
            return f"UntypedStorage[{v.nbytes()} bytes]"
        return repr(v)

    return f"{name}(" + ", ".join(f"{k}={show(v)}" for k, v in kwargs.items()) + ")"
