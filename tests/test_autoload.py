"""An installed jaxdev loads with `import torch` (PyTorch's `torch.backends` entry points), and nothing
in the current directory or a broken install makes `import torch` fail (`_jaxdev_autoload.py`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

CODE = "import torch; print(torch.ones(2, device='jax').cpu().tolist())"
NOT_LOADED = "jaxdev did not load with `import torch`"
# The package the entry point loads: the one installed beside the entry module (the source tree under
# an editable install, site-packages otherwise), whichever `jaxdev` this test process imported.
INSTALLED = Path(importlib.util.find_spec("_jaxdev_autoload").origin).resolve().parent / "jaxdev" / "__init__.py"


def _run(code=CODE, cwd=None, **env):
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **env},
    )


def test_import_torch_is_enough():
    out = _run()
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[1.0, 1.0]"


def test_autoload_can_be_turned_off():
    out = _run(TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert out.returncode != 0 and "privateuseone device type at start of device string: jax" in out.stderr


def _empty_folder(cwd: Path) -> None:
    (cwd / "jaxdev").mkdir()


def _clone_parent(cwd: Path) -> None:
    (cwd / "jaxdev").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)


def _script_named_jaxdev(cwd: Path) -> None:
    (cwd / "jaxdev.py").write_text("print('the script ran')\n")


@pytest.mark.parametrize("shadow", [_empty_folder, _clone_parent, _script_named_jaxdev], ids=lambda f: f.__name__)
def test_a_jaxdev_in_the_current_directory_does_not_shadow_the_installed_one(tmp_path, shadow):
    # Python would import the folder (a namespace package) or the script as `jaxdev`: the entry point
    # loads the installed package instead, and a later `import jaxdev` gets that one too.
    shadow(tmp_path)
    out = _run(CODE + "; import jaxdev; print(jaxdev.__file__)", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[1.0, 1.0]", str(INSTALLED)]
    assert NOT_LOADED not in out.stderr, out.stderr[-2000:]


def test_the_checkout_as_current_directory_loads_its_own_source():
    out = _run(CODE + "; import jaxdev; print(jaxdev.__file__)", cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "[1.0, 1.0]" and NOT_LOADED not in out.stderr


def _broken_jax(cwd: Path) -> dict:
    (cwd / "jax").mkdir()
    (cwd / "jax" / "__init__.py").write_text("raise ImportError('simulated broken jax install')\n")
    return {"PYTHONPATH": os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")])}


def _folder_imported_first(cwd: Path) -> dict:
    _empty_folder(cwd)
    return {}


@pytest.mark.parametrize(
    "setup, code, reason",
    [
        (_broken_jax, "import torch", "ImportError: simulated broken jax install"),
        (_folder_imported_first, "import jaxdev, torch", "a folder that is not the jaxdev package"),
    ],
    ids=["broken-install", "folder-imported-first"],
)
def test_a_failed_load_is_one_warning_and_torch_without_jax(tmp_path, setup, code, reason):
    out = _run(code + "; print(torch.ones(2).tolist())", cwd=tmp_path, **setup(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[1.0, 1.0]"
    assert out.stderr.count(NOT_LOADED) == 1 and reason in out.stderr, out.stderr[-2000:]
