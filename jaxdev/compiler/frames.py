"""Dynamo's frame hook never enters JAX or jaxdev: where they start, dynamo stops, all the way down.

Where a compiled function breaks its graph, dynamo runs the unsupported code eagerly with its frame
hook still set, so every Python frame started there is offered to dynamo; on jax tensors that is
jaxdev's kernels and the JAX they call. `trace_rules.add` puts those modules on dynamo's skip list,
but a skip there is for that frame alone: the frames it calls are offered in turn. JAX calls Python's
logging (`jax._src.compiler` asks `logger.isEnabledFor` for every program it compiles), and logging
is not on the list (torch 2.13): dynamo compiled `Logger.debug` as a frame of its own, could not
trace `isEnabledFor`, and counted a graph break that the same model on CPU does not have (a
`.tolist()` break followed by a read JAX had not compiled yet: 2 breaks on jax, 1 on CPU).

So a frame of these modules is skipped together with every frame it calls (dynamo's SKIP action for
the frame and recursively), and dynamo remembers that on the code object, as it remembers its own
skips: the hook is not consulted again for that code. A function compiled with torch.compile inside
still compiles: its wrapper sets the hook again.
"""

from __future__ import annotations

import importlib.util


def roots(modules) -> tuple[str, ...]:
    """The source paths (a package's folder, a module's file) of `modules`, as trace_rules.add reads them."""
    out = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin:
            out.append(origin[: -len("__init__.py")] if origin.endswith("__init__.py") else origin)
    return tuple(out)


def skip_recursively(modules) -> bool:
    """Make dynamo skip the frames of `modules` with all they call; False where this torch's dynamo
    lacks the pieces (then only the frames themselves are skipped, as trace_rules.add does)."""
    try:
        from torch._dynamo import convert_frame
        from torch._dynamo.types import ConvertFrameReturn, FrameAction, FrameExecStrategy
    except ImportError:
        return False
    cls = getattr(convert_frame, "CatchErrorsWrapper", None)
    if cls is None:
        return False
    original = cls.__call__
    if getattr(original, "_jaxdev_roots", None) is not None:
        original._jaxdev_roots += roots(modules)
        return True
    paths = roots(modules)
    # torch 2.13's ConvertFrameReturn says why a frame was skipped; torch 2.11's has no such field
    fields = getattr(ConvertFrameReturn, "__dataclass_fields__", {})
    why = {"skip_reason": "jax and jaxdev run without dynamo (jaxdev/compiler/frames.py)"}
    why = why if "skip_reason" in fields else {}

    def __call__(self, frame, cache_entry, frame_state):
        if frame.f_code.co_filename.startswith(__call__._jaxdev_roots):
            strategy = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)
            return ConvertFrameReturn(frame_exec_strategy=strategy, **why)
        return original(self, frame, cache_entry, frame_state)

    __call__._jaxdev_roots = paths
    cls.__call__ = __call__
    return True
