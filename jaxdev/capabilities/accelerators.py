"""PyTorch's autograd engine serves one accelerator per process, and with jaxdev loaded it is `jax`.

`at::getAccelerator()` answers PrivateUse1 as soon as a PrivateUse1 backend is named (c10's
`is_privateuse1_backend_registered`, whatever else the build has), and the engine's stream
bookkeeping (`Node::stream()`) keeps streams only for nodes on that accelerator. So in a process
that imported jaxdev, a backward through CUDA (or XPU, MPS) tensors fails inside PyTorch with
`opt_ready_stream && opt_parent_stream INTERNAL ASSERT FAILED` (pytorch/pytorch#161129, torch >= 2.8;
seen with torch 2.11 on an H200). Nothing a Python backend registers changes that choice, and
forward passes on CUDA are unaffected, so jaxdev does not refuse CUDA: it turns the assert into one
sentence where it strikes, around the engine's Python entry point (every `backward()` and
`torch.autograd.grad` goes through `Variable._execution_engine.run_backward`).
"""

from __future__ import annotations

from torch.autograd.variable import Variable

_ASSERT = "opt_ready_stream && opt_parent_stream"
MESSAGE = (
    "a backward pass through tensors of another accelerator (cuda, xpu, mps) cannot run in a process that "
    "imported jaxdev: PyTorch's autograd engine serves one accelerator per process and, once PrivateUse1 is "
    "registered, that is 'jax' (pytorch/pytorch#161129); train on that accelerator in a process without jaxdev "
    "(TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps an installed jaxdev from loading)"
)


class OneAcceleratorEngine:
    """PyTorch's engine object, with its internal assert about foreign streams said in words."""

    def __init__(self, engine):
        self._engine = engine

    def run_backward(self, *args, **kwargs):
        try:
            return self._engine.run_backward(*args, **kwargs)
        except RuntimeError as error:
            if _ASSERT in str(error):
                raise RuntimeError(MESSAGE) from None
            raise

    def __getattr__(self, name):  # queue_callback, is_checkpoint_valid, ...
        return getattr(self._engine, name)


def install() -> None:
    if not isinstance(Variable._execution_engine, OneAcceleratorEngine):
        Variable._execution_engine = OneAcceleratorEngine(Variable._execution_engine)
