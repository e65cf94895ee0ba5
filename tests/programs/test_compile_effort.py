"""JAXDEV_COMPILE_EFFORT (jaxdev/programs/compile_effort.py): per-op programs compile at the effort chosen,
fused eager's segments and compiled graphs at XLA's default, and a wrong value is one sentence."""

from __future__ import annotations

import pytest
import torch

import jaxdev
from jaxdev.programs import compile_effort, exec_cache

pytestmark = pytest.mark.skipif(exec_cache._ORIGINAL is None, reason="this JAX's compile path is not hooked")


@pytest.fixture
def compiled_options(monkeypatch):
    """The compiler options of every program compiled (not loaded) while the test runs."""
    seen = []
    original = exec_cache._ORIGINAL

    def compile_noting(*args, **params):
        seen.append(dict(params["compiler_options_kvs"]))
        return original(*args, **params)

    monkeypatch.setattr(exec_cache, "_ORIGINAL", compile_noting)
    monkeypatch.setenv(exec_cache.ENV, "off")  # compiled here, not loaded from an earlier run's entry
    return seen


def _new_shape(k: int) -> torch.Tensor:
    # a size no other test uses, so the op's program is new to this process
    return torch.arange(1.0, 7919.0 + k, device="jax")


@pytest.mark.parametrize("setting,effort", [("low", -1.0), ("-0.25", -0.25)])
def test_per_op_programs_take_the_effort_chosen(monkeypatch, compiled_options, setting, effort):
    monkeypatch.setenv(compile_effort.ENV, setting)
    with jaxdev.eager_mode("op"):
        (_new_shape(int(effort * -100)) * 3).cpu()
    assert compiled_options, "no program compiled"
    assert all(o.get(compile_effort.OPTION) == effort for o in compiled_options)


def test_default_leaves_xla_its_own(monkeypatch, compiled_options):
    monkeypatch.delenv(compile_effort.ENV, raising=False)
    with jaxdev.eager_mode("op"):
        (_new_shape(50) * 3).cpu()
    assert compiled_options and all(compile_effort.OPTION not in o for o in compiled_options)


def test_fused_segments_and_compiled_graphs_keep_the_default(monkeypatch, compiled_options):
    monkeypatch.setenv(compile_effort.ENV, "low")
    x = _new_shape(60)
    compiled_options.clear()
    with jaxdev.eager_mode("fused"):
        y = (x * 3 + 1).sin()
        jaxdev.eager_modes.flush()
    segment = [o for o in compiled_options if compile_effort.OPTION not in o]
    assert segment, "the fused segment's program took the per-op effort"

    compiled_options.clear()
    fn = torch.compile(lambda t: (t * 5 - 2).cos(), backend="jax")
    with jaxdev.eager_mode("op"):
        fn(y).cpu()
    assert any(compile_effort.OPTION not in o for o in compiled_options), "the graph's program took it"


@pytest.mark.parametrize("bad", ["fast", "2", "-1.5", "nan"])
def test_a_wrong_value_is_one_sentence(monkeypatch, bad):
    monkeypatch.setenv(compile_effort.ENV, bad)
    with pytest.raises(compile_effort.CompileEffortError, match=r"^jaxdev: JAXDEV_COMPILE_EFFORT=.* from -1 to 1$"):
        compile_effort.option(())
