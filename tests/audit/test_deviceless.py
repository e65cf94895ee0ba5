"""deviceless.py: a process that stands in for a TPU, every program it runs also compiled by XLA's TPU
compiler (libtpu, no chip), and `jaxdev coverage --tpu-compile` on it. The compiler's own answers are
facts of libtpu 0.0.42.1 (the version jax 0.10.2's `tpu` extra names): these tests skip with that
reason where libtpu is not in .libtpu/ (bash scripts/get_libtpu.sh) or $JAXDEV_LIBTPU."""

from __future__ import annotations

import functools
import io
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from jaxdev.audit import deviceless, runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.cache
def _libtpu_problem() -> str | None:
    """Why XLA's TPU compiler cannot run here (None: it can): not fetched, or not loadable on this CPU."""
    if deviceless.path() is None:
        return "libtpu (XLA's TPU compiler) is not in .libtpu/: bash scripts/get_libtpu.sh"
    probe = subprocess.run(
        [sys.executable, "-c", "from jaxdev.audit import deviceless; deviceless.probe()"],
        env=deviceless.environment(dict(os.environ)), capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    if probe.returncode != 0:
        return "libtpu does not describe a TPU topology here: " + (probe.stderr.strip().splitlines() or ["?"])[-1][:200]
    return None


@pytest.fixture
def libtpu():
    problem = _libtpu_problem()
    if problem:
        pytest.skip(problem)


needs_libtpu = pytest.mark.usefixtures("libtpu")


def _stand_in(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`code` run in a fresh process that has installed itself as a stand-in for a TPU."""
    script = "from jaxdev.audit import deviceless\ndeviceless.install()\n" + textwrap.dedent(code)
    env = deviceless.environment(dict(os.environ, JAXDEV_FALLBACK="silent"))
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_a_dead_workers_last_fatal_line_is_its_reason():
    errors = io.BytesIO(
        b"I1206 06:02:19.1 1 noise.cc:1] starting\n"
        b"F1206 06:02:19.795884   24173 xprecision_rewriter.cc:2101] Unsupported CVT X{64|128} expansion\n"
        b"*** SIGABRT received by PID 24173 ***\nE1206 06:02:20.0 1 coredump_hook.cc:310] RAW: hook\n"
    )
    assert runner.fatal_line(errors) == "xprecision_rewriter.cc:2101] Unsupported CVT X{64|128} expansion"
    assert runner.fatal_line(io.BytesIO(b"Traceback (most recent call last):\nValueError: x\n")) == ""


def test_without_libtpu_the_run_is_refused_in_one_sentence(tmp_path):
    env = dict(os.environ, JAXDEV_LIBTPU=str(tmp_path))  # a folder without libtpu: the only one looked in
    result = subprocess.run(
        [sys.executable, "-m", "jaxdev.cli.main", "coverage", "sin", "--tpu-compile", "--dtype", "float32"]
        + ["--out", str(tmp_path / "out")],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    if "libtpu" not in sys.modules and _importable_libtpu():
        pytest.skip("libtpu is installed beside jax here: it is found without .libtpu")
    assert result.returncode != 0
    assert "XLA's TPU compiler is not available here" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def _importable_libtpu() -> bool:
    import importlib.util

    return importlib.util.find_spec("libtpu") is not None


@needs_libtpu
def test_the_tpu_compilers_refusals_reach_jaxdev_as_on_the_chip():
    """float64 LU: UNIMPLEMENTED from XLA's TPU compiler (the chip's own message), so jaxdev serves it on
    CPU; complex128 is refused in one sentence; kernels that widened to complex128 (matrix_exp,
    logcumsumexp, atanh of complex64) compile; a complex128 abs, which the compiler aborts on,
    never reaches it."""
    result = _stand_in(
        """
        import jax, torch, jaxdev
        jax.config.update("jax_enable_x64", True)
        a = torch.randn(4, 4, dtype=torch.float64)
        try:
            jax.jit(lambda m: jax.lax.linalg.lu(m)[0])(a.numpy())
        except jax.errors.JaxRuntimeError as e:
            print("raw lu:", str(e).split(";")[0])
        got = torch.linalg.inv(a.to("jax")).cpu()
        print("inv served:", torch.allclose(got, torch.linalg.inv(a)), jaxdev.fallback_counts())
        try:
            torch.randn(3, dtype=torch.float64, device="jax") * 2j
        except jaxdev.PlatformDtypeError as e:
            print("complex128:", str(e).split(":")[0])
        z = torch.randn(3, 3, dtype=torch.complex64)
        for f in (torch.linalg.matrix_exp, lambda t: torch.logcumsumexp(t, 0), torch.atanh):
            assert torch.allclose(f(z.to("jax")).cpu(), f(z), atol=1e-5)
        print("complex64 ok")
        """
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr[-2000:]
    assert "raw lu: UNIMPLEMENTED: Only F32 and C64 types are implemented in LuDecomposition" in out
    assert "inv served: True" in out and "linalg_inv_ex" in out
    assert "complex128: complex128 is not supported on device 'jax' on a TPU" in out
    assert "complex64 ok" in out


@needs_libtpu
def test_a_kernel_the_compiler_aborts_on_takes_only_its_process():
    """The stand-in really runs XLA's TPU compiler: a program it aborts on (a convert into complex128,
    written in plain JAX, which jaxdev's own programs never emit there) kills the process with
    SIGABRT, and the fatal line names why."""
    result = _stand_in(
        """
        import jax, jax.numpy as jnp, numpy as np
        from jax._src.interpreters import mlir
        from jaxdev.ops.kit import capabilities
        jax.config.update("jax_enable_x64", True)
        mlir.register_lowering(jax.lax.convert_element_type_p, capabilities._usual_convert)  # jaxdev's rule off
        jax.jit(lambda v: v.astype(jnp.complex128))(np.ones(3, np.float32))
        """
    )
    assert result.returncode == -6  # SIGABRT
    assert "Unsupported CVT" in runner.fatal_line(io.BytesIO(result.stderr.encode()))


@needs_libtpu
def test_coverage_on_the_stand_in_writes_its_own_platforms_file(tmp_path):
    out = tmp_path / "cov"
    cmd = [sys.executable, "-m", "jaxdev.cli.main", "coverage", "matrix_exp", "--tpu-compile", "--dtype", "complex64"]
    cmd += ["--dtype", "complex128", "--no-backward", "--max-samples", "1", "--jobs", "1", "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert not (out / "matrix.yaml").exists()  # never CPU's file
    data = yaml.safe_load((out / "tpu-compile" / "matrix.yaml").read_text())
    # JAXDEV_MATH unset: the TPU's default, near (math_mode.default_for), recorded with the platform
    assert data["platform"] == {"name": deviceless.NAME, "device_kind": deviceless.KIND, "math": "near"}
    cells = data["ops"]["matrix_exp"]["results"]
    assert cells["complex64"]["forward"]["status"] == "pass"
    assert cells["complex128"]["forward"]["status"] == "unsupported"
    assert "complex128 is not supported on device 'jax' on a TPU" in cells["complex128"]["forward"]["reason"]


def test_forgetting_the_platform_reads_the_math_setting_again(monkeypatch):
    """JAXDEV_MATH unset is the platform's default: a step recorded on CPU (auto) and traced as a TPU
    (benchmarks/tpu_aot.py's as_tpu) took auto's functions, not near's, the chip's default."""
    import jax

    from jaxdev.ops.kit import math_mode

    monkeypatch.delenv("JAXDEV_MATH", raising=False)
    monkeypatch.setattr(math_mode, "_mode", "auto")  # as read while the step was recorded on CPU
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    deviceless.forget_platform()
    assert math_mode.mode() == "near"
    monkeypatch.undo()
    deviceless.forget_platform()  # and this session's own again
    assert math_mode.mode() == math_mode.resolve(os.environ.get("JAXDEV_MATH"), jax.default_backend())


@needs_libtpu
def test_the_stand_in_compiles_with_the_options_the_chip_gets():
    """A per-op program reaches XLA's TPU compiler with the compiler options jaxdev adds to it on the
    chip (exec_cache.compiler_options: JAXDEV_COMPILE_EFFORT's effort, an exact program's cheaper
    compile); it compiled with none before, so the stand-in could not measure them."""
    result = _stand_in(
        """
        import os, torch, jaxdev
        from jaxdev.audit import deviceless
        seen = []
        usual = deviceless.compile_for_tpu
        deviceless.compile_for_tpu = lambda fn, *avals, options=(): seen.append(options) or usual(fn, *avals, options=options)
        x = torch.arange(6.0).to("jax")
        with jaxdev.eager_mode("op"):
            print("sum", (x * 3 + 1).sum().item())
            x.view(2, 3).t().contiguous().cpu()
        efforts = {dict(o).get("exec_time_optimization_effort") for o in seen}
        print("efforts", sorted(e for e in efforts if e is not None))
        print("exact", any(dict(o).get("xla_backend_optimization_level") == 0 for o in seen))
        """,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sum 51.0" in result.stdout
    assert "efforts []" in result.stdout  # the default: XLA's own
    assert "exact True" in result.stdout  # the transpose's copy


@needs_libtpu
def test_the_stand_in_compiles_at_the_chosen_compile_effort(monkeypatch):
    monkeypatch.setenv("JAXDEV_COMPILE_EFFORT", "low")
    result = _stand_in(
        """
        import torch, jaxdev
        from jaxdev.audit import deviceless
        seen = []
        usual = deviceless.compile_for_tpu
        deviceless.compile_for_tpu = lambda fn, *avals, options=(): seen.append(options) or usual(fn, *avals, options=options)
        with jaxdev.eager_mode("op"):
            print("sum", (torch.arange(6.0).to("jax") * 3 + 1).sum().item())
        print("efforts", sorted({dict(o).get("exec_time_optimization_effort") for o in seen}))
        """,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sum 51.0" in result.stdout and "efforts [-1.0]" in result.stdout
