"""torchvision for benchmarks that run third-party models (benchmarks/third_party_models.py) or import
transformers, which imports torchvision where it is installed (benchmarks/static_cache_generate.py).

PyPI's torchvision 0.28.0 is a CUDA build whose operator library does not load against torch's CPU wheel,
and `import torchvision` (so `from transformers import GPT2LMHeadModel`) then raises "operator
torchvision::nms does not exist". The models need none of its operators: where the library fails, its
meta/autograd registrations of those operators (which need the library) are skipped."""

from __future__ import annotations

import sys
import types


def import_torchvision():
    """torchvision, imported with its failed operator library stubbed out. Call it before transformers."""
    try:
        import torchvision
    except (RuntimeError, OSError):
        for name in list(sys.modules):
            if name.startswith("torchvision"):
                del sys.modules[name]
        for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
            sys.modules[name] = types.ModuleType(name)
        import torchvision
    return torchvision
