import signal
import time

import torch
from conftest import jaxdev_process

from jaxdev.audit import matrix
from jaxdev.audit.model import Cell


def test_coverage_tiny_scope_writes_a_canonical_matrix(cli, tmp_path):
    code, out = cli("coverage", "sin", "--dtype", "float32", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    assert "samples/s" in out
    path = tmp_path / "matrix.yaml"
    m = matrix.load(str(path))
    assert m.to_yaml()["schema"] == matrix.SCHEMA and m.run.complete
    assert set(m.versions) >= {"torch", "jax", "jaxdev"}
    for direction in ("forward", "backward"):
        entry = m.get("sin", "float32", direction)
        assert entry.status in {
            "pass",
            "fallback",
            "missing",
            "lost_autograd",
            "exception",
            "wrong",
            "dtype_mismatch",
            "shape_mismatch",
        }
        assert entry.samples >= 1
    assert "aten::sin" in m.ops["sin"].aten
    # YAML round trip: load -> save gives the same bytes
    before = path.read_bytes()
    matrix.save(matrix.load(str(path)), str(path))
    assert path.read_bytes() == before


def test_broken_kernel_is_a_wrong_result_with_errors(cli, tmp_path):
    code, out = cli(
        "coverage", "jaxdev_audit_test.good", "--jobs", "1", "--out", str(tmp_path), env={"JAXDEV_TEST_BREAK": "1"}
    )
    assert code == 0, out
    entry = matrix.load(str(tmp_path / "matrix.yaml")).get("jaxdev_audit_test.good", "float32", "forward")
    assert entry.status == "wrong"
    assert entry.max_abs == 2.0 and "max abs err" in entry.reason and entry.repro


def test_crash_and_hang_cost_only_their_sample(cli, tmp_path):
    code, out = cli(
        "coverage",
        "jaxdev_audit_test.crash",
        "jaxdev_audit_test.hang",
        "--timeout",
        "4",
        "--jobs",
        "2",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out
    m = matrix.load(str(tmp_path / "matrix.yaml"))
    crash = m.get("jaxdev_audit_test.crash", "float32", "forward")
    hang = m.get("jaxdev_audit_test.hang", "float32", "forward")
    assert crash.status == "crash" and "SIGSEGV" in crash.reason
    assert crash.counts == {"crash": 1, "pass": 2}
    # the repro names the sample that crashed: its shapes and dtypes, not just its index
    assert "size=(2,)" in crash.repro and "float32" in crash.repro
    assert "size=(2,)" in hang.repro
    assert hang.status == "timeout" and hang.counts == {"timeout": 1, "pass": 2}


def test_resume_completes_a_killed_sweep(cli, tmp_path):
    proc = jaxdev_process(
        "coverage", "jaxdev_audit_test.good", "jaxdev_audit_test.slow", "--jobs", "1", "--out", str(tmp_path)
    )
    path = tmp_path / "matrix.yaml"
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        if path.exists() and "jaxdev_audit_test.good" in path.read_text():
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = matrix.load(str(path))  # never a truncated file
    assert not partial.run.complete
    assert partial.get("jaxdev_audit_test.slow", "float32", "forward") is None
    missing = 2 - len(list(partial.cells()))
    code, out = cli(
        "coverage",
        "jaxdev_audit_test.good",
        "jaxdev_audit_test.slow",
        "--jobs",
        "1",
        "--resume",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out
    assert f"{missing} units" in out  # only the missing cells ran (1 unless the machine was too busy)
    m = matrix.load(str(path))
    assert m.run.complete
    assert m.get("jaxdev_audit_test.slow", "float32", "forward").status == "pass"
    assert m.get("jaxdev_audit_test.good", "float32", "forward").status == "pass"


def test_shards_split_ops_and_merge(cli, tmp_path):
    from jaxdev.audit import sweep

    one = {u.op for u in sweep.plan(["jaxdev_audit_test.*"], shard=(1, 2))}
    two = {u.op for u in sweep.plan(["jaxdev_audit_test.*"], shard=(2, 2))}
    assert one and two and not one & two
    a, b = matrix.empty({"complete": True}), matrix.empty({"complete": True})
    a.put("x", "float32", "forward", Cell("pass"))
    b.put("y", "float32", "forward", Cell("wrong"))
    matrix.save(a, str(tmp_path / "a.yaml"))
    matrix.save(b, str(tmp_path / "b.yaml"))
    code, out = cli(
        "coverage",
        "--merge",
        str(tmp_path / "a.yaml"),
        "--merge",
        str(tmp_path / "b.yaml"),
        "--out",
        str(tmp_path / "m"),
    )
    assert code == 0, out
    merged = matrix.load(str(tmp_path / "m" / "matrix.yaml"))
    assert merged.summary["forward"] == {"pass": 1, "wrong": 1}
    # as a shell expands `--merge shard*/matrix.yaml`: the files after the first come as OPS
    code, out = cli(
        "coverage", "--merge", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--out", str(tmp_path / "g")
    )
    assert code == 0, out
    assert matrix.load(str(tmp_path / "g" / "matrix.yaml")).summary["forward"] == {"pass": 1, "wrong": 1}
    code, out = cli("coverage", "--merge", str(tmp_path / "a.yaml"), "sin", "--out", str(tmp_path / "h"))
    assert code == 2 and "'sin' is not a .yaml matrix" in out, out


def test_bad_inputs_are_one_sentence(cli, tmp_path):
    for args, words in (
        (["coverage", "sin", "--dtype", "float33"], "unknown dtype 'float33'; did you mean float32"),
        (["coverage", "sinn"], "no OpInfo or aten operator named 'sinn'; nearest: sin,"),
        (["coverage", "sin", "--shard", "3/2"], "--shard must look like K/N"),
        (["coverage", "sin", "--jobs", "0", "--out", str(tmp_path)], "--jobs must be at least 1"),
        (["report", str(tmp_path / "none.yaml")], "no coverage matrix at"),
    ):
        code, out = cli(*args)
        assert code == 2, (args, out)
        assert words in out and "Traceback" not in out


def test_max_samples_limits_and_flags_the_cell(cli, tmp_path):
    code, out = cli(
        "coverage",
        "jaxdev_audit_test.good",
        "neg",
        "--dtype",
        "float32",
        "--no-backward",
        "--max-samples",
        "2",
        "--jobs",
        "1",
        "--out",
        str(tmp_path),
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert code == 0, out
    m = matrix.load(str(tmp_path / "matrix.yaml"))
    entry = m.get("jaxdev_audit_test.good", "float32", "forward")
    assert entry.samples == 2 and entry.limited
    assert not m.get("neg", "float32", "forward").limited  # neg has one sample
    assert any((tmp_path / "cache").iterdir())  # --cache-dir is where the workers' executables go


def test_progress_lines_in_a_log(cli, tmp_path, monkeypatch):
    from jaxdev.cli import progress

    monkeypatch.setattr(progress.LogProgress, "LOG_EVERY_S", 0.0)
    code, out = cli("coverage", "jaxdev_audit_test.good", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    assert "1/1 units, 3 samples" in out and "samples/s, elapsed 0:" in out and "ETA" in out


def test_workers_compile_as_users_do_but_faster_unless_told_otherwise():
    from jaxdev.audit import runner

    env = runner.worker_env({"XLA_FLAGS": "--xla_backend_optimization_level=3"}, cache_dir="/tmp/c")
    assert env["XLA_FLAGS"].split() == [
        "--xla_backend_optimization_level=3",
        "--xla_llvm_disable_expensive_passes=true",
    ]
    assert env[runner.CACHE_ENV] == "/tmp/c" and env["JAXDEV_FALLBACK"] == "silent"
    # XLA's default optimization level, as users compile: level 0 changes floating-point results
    assert "optimization_level" not in runner.worker_env({}, cache_dir="/tmp/c")["XLA_FLAGS"]
    env = runner.worker_env({"XLA_FLAGS": "--xla_llvm_disable_expensive_passes=false"})
    assert env["XLA_FLAGS"] == "--xla_llvm_disable_expensive_passes=false"


def test_compile_mode_adds_its_direction_and_keeps_the_eager_cells(cli, tmp_path):
    code, out = cli(
        "coverage", "sin", "nonzero", "--dtype", "float32", "--no-backward", "--jobs", "1", "--out", str(tmp_path)
    )
    assert code == 0, out
    code, out = cli("coverage", "sin", "nonzero", "--mode", "compile", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    m = matrix.load(str(tmp_path / "matrix.yaml"))
    assert m.get("sin", "float32", "forward").status == "pass"  # kept from the eager run
    assert m.get("sin", "float32", "compile").status == "pass"
    # nonzero's output shape depends on values: XLA cannot hold it in one program, and says so.
    nonzero = m.get("nonzero", "float32", "compile")
    assert nonzero.status == "untraced" and "aten::nonzero" in nonzero.reason
    assert set(m.summary["compile"]) == {"pass", "untraced"}


def test_compile_mode_catches_a_broken_kernel(cli, tmp_path):
    code, out = cli(
        "coverage",
        "jaxdev_audit_test.good",
        "--mode",
        "compile",
        "--jobs",
        "1",
        "--out",
        str(tmp_path),
        env={"JAXDEV_TEST_BREAK": "1"},
    )
    assert code == 0, out
    entry = matrix.load(str(tmp_path / "matrix.yaml")).get("jaxdev_audit_test.good", "float32", "compile")
    # the test op's kernel reads values on CPU, so its graph cannot be traced: it runs op by op, wrong
    assert entry.status == "wrong"


def test_backward_runs_in_every_dtype_the_opinfo_differentiates():
    from jaxdev.audit import samples

    op = samples.op_db()["sin"]
    expected = set(op.supported_backward_dtypes("cpu")) & set(op.supported_dtypes("cpu"))
    assert {torch.float32, torch.float64, torch.complex64} <= expected  # not float32 alone
    units = samples.units(["sin"])
    assert {u.dtype for u in units if u.direction == "backward"} == {samples.dtype_name(d) for d in expected}
    # --dtype narrows backward too; an OpInfo that differentiates nothing has no backward cells
    assert [u for u in samples.units(["sin"], ["float64"]) if u.direction == "backward"] == [
        samples.Unit("sin", "float64", "backward")
    ]
    assert not [u for u in samples.units(["argmax"]) if u.direction == "backward"]
