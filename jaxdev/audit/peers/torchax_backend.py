"""torchax (google/torchax, the seed project's successor) as a peer backend of the auditor: how an
OpInfo sample or a direct trial runs through it, as a torchax user runs PyTorch code. Light to
import (the parent reads NAME, INSTALL, DIRECTIONS and HOW); `load()` imports torchax, in a peer's
worker only (jaxdev_cli/peer_worker.py).

The choices, recorded in the matrix as HOW:
- torchax is imported through peers/torchax_compat.py: 0.0.13, the newest release, names
  named-tensor overloads torch 2.13 removed and does not import without it (google/torchax#101).
- `torchax.enable_accuracy_mode()`, torchax's own switch for PyTorch's numerics: float64 kept
  (jax_enable_x64), float32 matrix products at 'highest', torch's result dtypes. Without it a float64
  tensor becomes a float32 array, and every float64 cell would measure that setting, not the op.
- Eager (forward, backward) runs inside `with torchax.default_env():` (what enable_globally() turns
  on, scoped to the sample so that CPU's reference runs outside it): the CPU sample's tensors moved
  with `.to('jax')` (a differentiable leaf made one again with requires_grad_), the OpInfo's op
  called on them, the results read back with `.cpu()`.
- Backward is `torch.autograd.backward(outputs, grad_outputs)`, i.e. loss.backward() for several
  outputs, with CPU's seeds moved to jax as grad outputs; the grads are the inputs' `.grad`.
- Compile is torchax's jitted path, `torchax.compile(fn)` (interop.jax_jit: jax.jit of fn run under
  the environment), fn taking the sample's jax tensors and closing over its other arguments (jax.jit
  traces arrays only). No compile-backward (jitted training takes jax.value_and_grad of a functional
  loss, not torch's autograd) and no fused direction (a mode of jaxdev's).
"""

from __future__ import annotations

import contextlib

from jaxdev.audit.devices import Device

NAME = "torchax"
INSTALL = "pip install --no-deps torchax==0.0.13"
DIRECTIONS = ("forward", "backward", "compile")
HOW = (
    "import: through jaxdev/audit/peers/torchax_compat.py (torchax 0.0.13 names named-tensor overloads "
    "torch 2.13 removed: google/torchax#101)",
    "setting: torchax.enable_accuracy_mode() (float64 kept, float32 matmuls at 'highest', torch's result dtypes)",
    "forward: inside `with torchax.default_env():`, the sample's tensors moved with .to('jax'), the op "
    "called, results read back with .cpu()",
    "backward: as forward, then torch.autograd.backward(outputs, CPU's seeds moved to jax) "
    "(loss.backward()), grads read from the inputs' .grad",
    "compile: torchax.compile(fn) (interop.jax_jit) of fn(jax tensors) closing over the sample's other arguments, "
    "a named-tuple result (torch.return_types) returned as a plain tuple (jax.jit takes no structseq)",
    "extra grad_fn: where more outputs are differentiable than on CPU (_batch_norm_with_update's statistics), "
    "CPU's seeds go to the outputs of their shape and dtype, in order",
)


def load():
    """(torchax's version, the Torchax device): imports torchax through the shim, accuracy mode on."""
    from jaxdev.audit.peers import torchax_compat

    torchax = torchax_compat.import_torchax()
    torchax.enable_accuracy_mode()
    return torchax.__version__, Torchax(torchax)


class Torchax(Device):
    """torchax's `jax` device: its environment active while a sample or a trial runs."""

    name = "jax"
    directions = DIRECTIONS
    compile_reference = False  # its jit is not torch.compile: torch.compile's CPU run is no reference

    def __init__(self, torchax):
        self.torchax = torchax
        self.env = torchax.default_env()

    def context(self):
        return self.env

    @contextlib.contextmanager
    def outside(self):
        """torchax's modes off for a CPU step inside the environment, as torchax's own CPU copies
        switch them off: called by keyword alone, an op on CPU tensors is taken for torchax's inside
        it (its dispatch looks for tensors among the positional arguments only)."""
        import torch
        from torch.utils._mode_utils import no_dispatch

        with no_dispatch(), torch._C.DisableTorchFunction():
            yield

    def exception_status(self, e: BaseException) -> str:
        """Its "Operator with name ... has no lowering" (OperatorNotFound) is `missing`, as jaxdev's
        dispatcher's "Could not run" is; anything else as on every device."""
        if isinstance(e, self.torchax.tensor.OperatorNotFound):
            return "missing"
        return super().exception_status(e)

    def to_cpu(self, x):
        import torch

        if not isinstance(x, torch.Tensor) or x.device.type == "cpu":
            return x
        with torch.no_grad():
            return x.cpu().clone()  # torchax's CPU copy shares a read-only numpy buffer

    def run(self, unit, op, sample, seeds) -> tuple[object, list]:
        from torch.utils._pytree import tree_map

        from jaxdev.audit import calls
        from jaxdev.audit import samples as sample_db

        with self.env:
            moved = sample_db.to_device(sample, self.name, unit.op)
            sample_db.seed_all(0)
            if unit.direction == "compile":
                out = self._jitted(op, moved)
            elif unit.direction == "backward":
                out = self._backward(op, moved, seeds)
            else:
                out = op(moved.input, *moved.args, **moved.kwargs)
            return tree_map(self.to_cpu, out), calls.layouts(out)

    def _backward(self, op, sample, seeds) -> list:
        import torch
        from torch.utils._pytree import tree_flatten

        from jaxdev.audit.calls import LostAutograd

        out = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        leaves = tree_flatten((sample.input, sample.args, sample.kwargs))[0]
        inputs = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
        if len(outs) > len(seeds):
            outs = _seeded(outs, seeds)
        if len(outs) != len(seeds):
            raise LostAutograd(
                f"{len(seeds) - len(outs)} of {len(seeds)} outputs have no grad_fn (CPU's eager outputs have one)"
            )
        torch.autograd.backward(outs, [g.to(self.name) for g in seeds])
        return [t.grad for t in inputs]

    def _jitted(self, op, sample):
        from torch.utils._pytree import tree_flatten, tree_unflatten

        leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        traced = [i for i, x in enumerate(leaves) if isinstance(x, self.torchax.tensor.Tensor | self.torchax.view.View)]

        def fn(*tensors):
            filled = list(leaves)
            for i, t in zip(traced, tensors):
                filled[i] = t
            first, args, kwargs = tree_unflatten(filled, spec)
            out = op(first, *args, **kwargs)
            return tuple(out) if isinstance(out, tuple) and type(out) is not tuple else out  # jax.jit: no structseq

        return self.torchax.compile(fn)(*(leaves[i] for i in traced))


def _seeded(outs: list, seeds: list) -> list:
    """Where torchax makes more outputs differentiable than CPU does (_batch_norm_with_update's saved
    statistics), the outputs CPU's seeds belong to: for each seed in order, the next output of its
    shape and dtype (those CPU leaves without grad_fn are torchax's extra ones)."""
    chosen, rest = [], list(outs)
    for g in seeds:
        match = next((t for t in rest if t.shape == g.shape and t.dtype == g.dtype), None)
        if match is None:
            raise RuntimeError(f"{len(outs)} outputs have a grad_fn where CPU's eager run has {len(seeds)}")
        chosen.append(match)
        rest = rest[rest.index(match) + 1 :]
    return chosen
