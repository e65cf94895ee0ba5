"""An installed jaxdev loads with `import torch` (PyTorch's `torch.backends` entry points)."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = "import torch; print(torch.ones(2, device='jax').cpu().tolist())"


def _run(**env):
    return subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


def test_import_torch_is_enough():
    out = _run()
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[1.0, 1.0]"


def test_autoload_can_be_turned_off():
    out = _run(TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert out.returncode != 0 and "privateuseone device type at start of device string: jax" in out.stderr
