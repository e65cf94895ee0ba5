"""The calls fused eager runs at once instead of recording them (recorder.record asks here after its
replay guard missed): a copy from the device to the host (a read), a copy from the host onto the device
(an upload), and the fresh constants torch.optim makes its state with."""

from __future__ import annotations

import torch

from jaxdev import eager_modes
from jaxdev.fused.stats import STATS

TO_COPY = torch.ops.aten._to_copy.default

# A read (`_to_copy` to CPU of a non-empty jax tensor: `.cpu()`, `.numpy()`, `.tolist()`) always runs
# eagerly after the pending work: learn's evaluation finds that it reads values on the host. Keying it
# first (its whole key built, looked up in the trie, then undone) cost the LM's batch-1 forward ~35 us
# of its ~650 us read (benchmarks/fused_read.py); False keys it as any other op.
READS_AT_ONCE = True
READS = "it reads values on the host (TracerArrayConversionError)"  # the reason learn gives such a read


def reads(args, kwargs) -> bool:
    """`_to_copy` of a plain, non-empty jax tensor to CPU: a read (see READS_AT_ONCE). An empty one, or
    one with a conj/neg bit, is keyed (its copy reads nothing, or the key refuses the tensor)."""
    device = kwargs.get("device")
    if not READS_AT_ONCE or len(args) != 1 or device is None or torch.device(device).type != "cpu":
        return False
    t = args[0]
    return isinstance(t, torch.Tensor) and t.device.type == "jax" and t.numel() > 0 and not (t.is_conj() or t.is_neg())


# An upload (`_to_copy` of a CPU tensor onto jax: a decoding step's position) runs at once (recorder's
# _upload); keying it first only found that its CPU tensor cannot be recorded. False keys it first.
UPLOADS_AT_ONCE = True


def uploads(args, kwargs) -> bool:
    """`_to_copy` of a CPU tensor onto jax (`torch.tensor([i], device="jax")`, `x.to("jax")`)."""
    device = kwargs.get("device")
    return (
        len(args) == 1
        and isinstance(args[0], torch.Tensor)
        and args[0].device.type == "cpu"
        and device is not None
        and torch.device(device).type == "jax"
    )


# torch.optim makes its state with these (exp_avg = zeros_like(p, memory_format=torch.preserve_format),
# Adagrad's full_like; a capturable or compiled step's count torch.zeros((), device=p.device)): run_fresh
_FRESH = frozenset(
    (torch.ops.aten.zeros_like.default, torch.ops.aten.empty_like.default, torch.ops.aten.full_like.default)
)
# NAdam's capturable mu_product is ones(())
_FRESH_SCALARS = frozenset((torch.ops.aten.zeros.default, torch.ops.aten.ones.default))


def fresh(op, args, kwargs) -> bool:
    """Whether the call is one of those factories (see run_fresh)."""
    return (op in _FRESH and kwargs.get("memory_format") is torch.preserve_format) or (
        op in _FRESH_SCALARS and bool(args) and not args[0]
    )


def run_fresh(fn, args, kwargs):
    """A fresh constant tensor shaped like another, with its memory format kept, or a 0-d zero or one (the
    idioms torch.optim makes its state with on its first step), runs at once and joins no segment: it reads no device
    data (its model's sizes and strides alone), so like an upload it needs no flush. Recorded, the
    first step's segment would create the optimizer's state inside its program and the second take
    it as inputs: two programs as large (on CPU's tiny GPT, 3.6 s and 4.6 s of XLA compile, fused
    eager or a compiled step under it), where this way the second step replays the first's. Other
    factories stay recorded: a step's constants (autograd's ones_like seed) belong in its program."""
    STATS.fresh += 1
    with eager_modes.as_is():
        return fn(*args, **kwargs)
