"""The device under test: what check.run_sample runs an OpInfo sample on, and schema_samples.trial a
direct trial, against CPU. jaxdev's device (`Jaxdev`) is the default; a peer backend's (jaxdev/audit/
peers: torchax) is another, used in worker processes of its own (jaxdev_cli/peer_worker.py), where
`use` makes it the current one. The judging (check's, the direct trials') is the same for every
device: a device says how a sample runs on it, how its failures read and what it ran on CPU.

Light: nothing here imports jaxdev's device until one of Jaxdev's methods runs, so a peer's worker
imports this module (and check, calls, samples) without registering jaxdev's `jax` device.
"""

from __future__ import annotations

import contextlib

_LOST_AUTOGRAD_TEXT = ("an autograd kernel was not registered", "does not require grad and does not have a grad_fn")


def common_status(e: BaseException) -> str:
    """The status of a raise on any device: lost_autograd, missing or exception."""
    from jaxdev.audit.calls import LostAutograd

    text = str(e)
    if any(t in text for t in _LOST_AUTOGRAD_TEXT) or isinstance(e, LostAutograd):
        return "lost_autograd"
    # Composite kernels raise NotImplementedError for a backend they do not know
    # (convolution_overrideable); the dispatcher says "Could not run".
    if isinstance(e, NotImplementedError) or "Could not run '" in text:
        return "missing"
    return "exception"


def lost_autograd_warnings(caught) -> list[str]:
    """The caught warnings that say gradients were lost (any device)."""
    return [str(w.message) for w in caught if any(t in str(w.message) for t in _LOST_AUTOGRAD_TEXT)]


class Device:
    """A device under test. `name`: the torch device its tensors are made on; `directions`: those
    it runs (facts.DIRECTIONS); `compile_reference`: whether torch.compile's own run on CPU is a
    reference for its compiled directions (it is for a torch.compile backend, not for a jit of
    the backend's own). The methods a device has to give are `run` and, for direct trials,
    `context` (active while arguments are built on it, the op runs and the results come back)."""

    name = "jax"
    directions: tuple[str, ...] = ("forward", "backward")
    compile_reference = False

    def context(self):
        return contextlib.nullcontext()

    def outside(self):
        """Inside `context`, a context in which CPU runs as CPU (a step of the harness's own)."""
        return contextlib.nullcontext()

    def reset(self) -> None:
        """Before a sample or a trial: forget which ops ran on CPU (fallback_ops)."""

    def fallback_ops(self) -> list[str]:
        """The ops that ran on CPU instead of the device since `reset`."""
        return []

    def exception_status(self, e: BaseException) -> str:
        return common_status(e)

    def untraced(self, caught) -> list[str]:
        """The caught warnings that say a compiled graph ran op by op."""
        return []

    def to_cpu(self, x):
        """A result on the device as a CPU tensor (anything else as it is)."""
        from jaxdev.audit.calls import to_cpu

        return to_cpu(x)

    def run(self, unit, op, sample, seeds) -> tuple[object, list]:
        """The CPU sample run on the device in unit.direction: (its outputs, or in a backward direction
        the grads w.r.t. the differentiable inputs with CPU's `seeds` as grad outputs, as CPU
        tensors; their layouts on the device: calls.layouts)."""
        raise NotImplementedError


class Jaxdev(Device):
    """jaxdev's `jax` device: every direction, its CPU fallback counted, its UnsupportedError
    (tensors it cannot hold by design) `unsupported`, its compiled graphs' EagerGraphWarning untraced."""

    directions = ("forward", "backward", "compile", "compile-backward", "fused")
    compile_reference = True

    def reset(self) -> None:
        import jaxdev

        jaxdev.reset_fallback_counts()

    def fallback_ops(self) -> list[str]:
        import jaxdev

        return sorted(jaxdev.fallback_counts())

    def exception_status(self, e: BaseException) -> str:
        import jaxdev

        # By type only: jaxdev raises UnsupportedError for what it cannot hold by design (quantized
        # dtypes, sparse layouts), PlatformDtypeError for a dtype its platform cannot compile (complex128
        # on a TPU); a dtype's name never decides, so a bug raising anything else stays a failure.
        cause: BaseException | None = e
        while cause is not None:  # torch.compile re-raises a backend's error `from` it
            if isinstance(cause, (jaxdev.UnsupportedError, jaxdev.PlatformDtypeError)):
                return "unsupported"
            cause = cause.__cause__
        status = common_status(e)
        if status == "exception" and isinstance(e, jaxdev.fallback.FallbackError):
            return "missing"
        return status

    def untraced(self, caught) -> list[str]:
        import jaxdev

        warning = jaxdev.graphs.program.EagerGraphWarning
        return [str(w.message) for w in caught if issubclass(w.category, warning)]

    def run(self, unit, op, sample, seeds) -> tuple[object, list]:
        from torch.utils._pytree import tree_map

        from jaxdev.audit import calls
        from jaxdev.audit import samples as sample_db

        device_sample = sample_db.to_device(sample, "jax", unit.op)
        sample_db.seed_all(0)
        fresh = lambda device: sample_db.to_device(sample, device, unit.op)
        if unit.direction == "compile":
            return calls.compiled(op, device_sample, fresh)
        if unit.direction == "compile-backward":
            return calls.compiled_backward(op, device_sample, seeds, fresh)
        if unit.direction == "fused":
            return calls.fused(op, device_sample)
        actual, _ = calls.call(op, device_sample, unit.direction == "backward", seeds)
        laid = calls.layouts(actual)
        return tree_map(calls.to_cpu, actual), laid


JAXDEV = Jaxdev()
_current: list[Device] = [JAXDEV]


def current() -> Device:
    """The device this process tests: jaxdev's, unless a peer's worker chose its backend's (`use`)."""
    return _current[0]


def use(device: Device) -> None:
    _current[0] = device
