"""The PyTorch-suites runner's own logic (benchmarks/pytorch_suites): test names matched across
devices, outcomes read back from the plugin's records, CPU against jax, failures grouped by cause,
the test files extracted from a git copy; and the plugin with the crash restart on a tiny
device-generic file (CPU only, no PyTorch suite runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "pytorch_suites")
sys.path.insert(0, HERE)

import suites_results as sr  # noqa: E402
import suites_source  # noqa: E402


def test_neutral_key_matches_cpu_and_jax_instances():
    cpu = "test_view_ops.py::TestViewOpsCPU::test_view_dtype_new_cpu_float32"
    jax = "test_view_ops.py::TestViewOpsJAX::test_view_dtype_new_jax_float32"
    early = "test_view_ops.py::TestViewOpsPRIVATEUSE1::test_view_dtype_new_jax_float32"
    assert sr.neutral_key(cpu) == sr.neutral_key(jax) == sr.neutral_key(early)
    assert sr.neutral_key(cpu) == "test_view_ops.py::TestViewOps::test_view_dtype_new_{dev}_float32"
    # an op test: the op's name comes first; a name that contains 'cpu' itself keeps it
    op = "test_ops.py::TestCommonJAX::test_compare_cpu_nn_functional_conv2d_jax_float32"
    assert sr.neutral_key(op) == "test_ops.py::TestCommon::test_compare_cpu_nn_functional_conv2d_{dev}_float32"
    assert sr.neutral_key("t.py::TestNNDeviceTypeCPU::test_x_cpu") == "t.py::TestNNDeviceType::test_x_{dev}"


def test_normalise_groups_one_cause_across_shapes_dtypes_and_names():
    a = sr.normalise("RuntimeError", "zero_ of torch.bits8 on 'jax:0' is not supported (size 12)\nmore")
    b = sr.normalise("RuntimeError", "zero_ of torch.bits8 on 'jax:0' is not supported (size 3)")
    assert a == b == "RuntimeError: zero_ of <dtype> on '…' is not supported (size #)"
    c = sr.normalise("AssertionError", "Tensor-likes are not close!\n\nMismatched elements: 19 / 943920")
    assert c == "AssertionError: Tensor-likes are not close!"
    d = sr.normalise("TypeError", "expected float32 on jax, got float64 on cpu at 0x7f00ab")
    assert d == "TypeError: expected <dtype> on <dev>, got <dtype> on <dev> at #"
    assert sr.normalise("ValueError", "") == "ValueError"


def _records(*rows):
    return [json.dumps(dict(zip(("key", "nodeid", "when", "outcome", "duration"), r[:5]), **(r[5] if len(r) > 5 else {}))) for r in rows]  # fmt: skip


def test_read_outcomes_folds_phases_crashes_and_cut_lines():
    lines = _records(
        ("a", "A", "start", "", 0.0),
        ("a", "A", "setup", "passed", 0.1),
        ("a", "A", "call", "passed", 1.0),
        ("a", "A", "teardown", "passed", 0.1),
        ("b", "B", "start", "", 0.0),
        ("b", "B", "setup", "failed", 0.2, {"exc_type": "RuntimeError", "message": "no"}),
        ("b", "B", "teardown", "passed", 0.0),
        ("c", "C", "start", "", 0.0),
        ("c", "C", "setup", "skipped", 0.0, {"message": "Skipped: only CPU"}),
        ("c", "C", "teardown", "passed", 0.0),
        ("d", "D", "start", "", 0.0),
        ("d", "D", "setup", "passed", 0.0),
    ) + ['{"key": "e", "nodeid": "E", "wh']  # the line a killed process left half written
    out = sr.read_outcomes(lines)
    assert {k: o.outcome for k, o in out.items()} == {"a": "passed", "b": "error", "c": "skipped", "d": "crashed"}
    assert out["a"].duration == pytest.approx(1.2)
    assert (out["b"].exc_type, out["b"].message) == ("RuntimeError", "no")
    lines += _records(("d", "D", "teardown", sr.UNREACHED, 0.0))
    assert sr.read_outcomes(lines)["d"].outcome == sr.UNREACHED


def _o(key, outcome, exc="", msg=""):
    return sr.Outcome(key, f"f.py::T::{key}", outcome, 0.0, exc, msg)


def test_compare_counts_only_what_cpu_passes_and_jax_ran():
    cpu = {k: _o(k, "passed") for k in "abcdef"} | {"g": _o("g", "failed"), "h": _o("h", "skipped")}
    jax = {
        "a": _o("a", "passed"),
        "b": _o("b", "passed"),
        "c": _o("c", "failed", "RuntimeError", "x 1"),
        "d": _o("d", "skipped", msg="Skipped: Only runs on cpu"),
        "e": _o("e", "crashed"),
        "g": _o("g", "passed"),
        "h": _o("h", "failed"),
    }  # f never reached
    comp = sr.compare("s", cpu, jax)
    assert (comp.cpu_passed, comp.jax_passed, comp.jax_skipped, comp.not_reached) == (6, 2, 1, 1)
    assert comp.cpu_only_failures == 1
    assert dict(comp.skip_reasons) == {"Skipped: Only runs on cpu": 1}
    assert sorted(o.key for o in comp.jax_only) == ["c", "e"]
    assert comp.ratio == pytest.approx(2 / 4)
    assert sr.compare("s", {}, {}).ratio is None


def test_group_causes_counts_and_orders():
    failures = [
        _o("t1", "failed", "RuntimeError", "bits8 not supported (3)"),
        _o("t2", "failed", "RuntimeError", "bits16 not supported (4)"),
        _o("t3", "failed", "AssertionError", "Tensor-likes are not close!"),
        _o("t4", "crashed"),
    ]
    causes = sr.group_causes(failures)
    assert [(c.cause, c.count) for c in causes] == [
        ("RuntimeError: <dtype> not supported (#)", 2),
        ("AssertionError: Tensor-likes are not close!", 1),
        ("Crash: the process died in this test", 1),
    ]
    assert causes[0].example == "f.py::T::t1" and causes[0].tests == ["f.py::T::t1", "f.py::T::t2"]


def _git(repo, *args):
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True)


def test_extract_takes_the_pinned_commit_and_sibling_imports(tmp_path):
    repo = str(tmp_path / "pytorch")
    os.makedirs(os.path.join(repo, "test"))
    _git(repo, "init", "-q")
    for name, text in {"test_a.py": "import torch\nfrom helper_b import x\n", "helper_b.py": "x = 1\n"}.items():
        with open(os.path.join(repo, "test", name), "w") as f:
            f.write(text)
    _git(repo, "add", "test")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    with open(os.path.join(repo, "test", "test_a.py"), "w") as f:
        f.write("changed after the pinned commit\n")
    assert suites_source.check_revision(repo, commit[:10]) == commit
    into = str(tmp_path / "files")
    written = suites_source.extract(repo, commit, ["test_a.py"], into)
    assert sorted(os.path.basename(p) for p in written) == ["helper_b.py", "test_a.py"]
    with open(os.path.join(into, "test_a.py")) as f:
        assert f.read().startswith("import torch")  # the commit's text, not the work tree's
    with pytest.raises(suites_source.SourceError, match="is not in"):
        suites_source.check_revision(repo, "0" * 40)
    with pytest.raises(suites_source.SourceError, match=r"test/test_zz\.py is not in"):
        suites_source.extract(repo, commit, ["test_zz.py"], into)


_TINY = """
import os
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import HardwareClassification, TestCase


class TestTiny(TestCase):
    hw_classification = HardwareClassification.ACCELERATOR  # a newer file's tag: suites_compat supplies it

    def test_pass(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)

    def test_fail(self, device):
        raise RuntimeError("kernel for op_7 missing on " + device)

    def test_crash(self, device):
        os.abort()

    def test_late(self, device):
        pass


class TestOther(TestCase):
    def test_other(self, device):
        pass


instantiate_device_type_tests(TestTiny, globals(), only_for="cpu")
instantiate_device_type_tests(TestOther, globals(), only_for="cpu")
"""


def test_plugin_records_selects_and_restarts_past_a_crash(tmp_path):
    """The real runner on a tiny file: the abort in test_crash costs that test only, the rest run."""
    import suites_run

    files = tmp_path / "files"
    files.mkdir()
    (files / "test_tiny.py").write_text(textwrap.dedent(_TINY))
    suite = suites_source.Suite("tiny", "test_tiny.py", ("TestTiny",))
    results = str(tmp_path / "tiny-cpu.jsonl")
    opts = types.SimpleNamespace(k=None, time_limit=300, select_file=None, cache_dir_for=lambda r: None)
    done = suites_run.run_pass(suite, str(files), str(tmp_path), suites_run.PassResult("cpu", "cpu", results), opts)
    with open(results) as f:
        out = sr.read_outcomes(f)
    assert {k.split("::")[-1]: o.outcome for k, o in out.items()} == {
        "test_crash_{dev}": "crashed",
        "test_fail_{dev}": "failed",
        "test_late_{dev}": "passed",
        "test_pass_{dev}": "passed",
    }  # TestOther is left out by the class filter
    assert done.restarts == 1 and not done.stopped_by_time
    failed = next(o for o in out.values() if o.outcome == "failed")
    assert sr.normalise(failed.exc_type, failed.message) == "RuntimeError: kernel for op_7 missing on <dev>"


def test_report_merges_a_sample_and_its_complement(tmp_path):
    """--report over two runs of one suite: outcomes united, times summed, a pass only one run has left out."""
    import suites_merge

    suite = suites_source.SUITES["view_ops"]
    for name, key, jax_outcome, labels in (("a", "k1", "passed", ("cpu", "jax cold", "jax warm")), ("b", "k2", "failed", ("cpu", "jax cold"))):  # fmt: skip
        run = tmp_path / name
        run.mkdir()
        passes = [{"label": label, "wall_s": 10.0, "tests_s": 4.0} for label in labels]
        (run / "summary.json").write_text(json.dumps({"source": "src", "suites": [{"suite": suite.title, "passes": passes}]}))  # fmt: skip
        for label in labels:
            outcome = "passed" if label == "cpu" else jax_outcome
            extra = {"exc_type": "RuntimeError", "message": "no"} if outcome == "failed" else {}
            lines = _records((key, f"f.py::T::{key}", "call", outcome, 1.0, extra), (key, f"f.py::T::{key}", "teardown", "passed", 0.0))  # fmt: skip
            (run / f"view_ops-{label.replace(' ', '-')}.jsonl").write_text("\n".join(lines) + "\n")
    origin, rows = suites_merge.merge([str(tmp_path / "a"), str(tmp_path / "b")], [suite])
    ((title, comp, passes),) = rows
    assert origin == "src" and title == suite.title
    assert [(p.label, p.wall_s, p.tests_s) for p in passes] == [("cpu", 20.0, 8.0), ("jax cold", 20.0, 8.0)]
    assert (comp.cpu_passed, comp.jax_passed, [o.key for o in comp.jax_only]) == (2, 1, ["k2"])


def test_compat_supplies_only_missing_names_the_files_mention(monkeypatch):
    """Newer test files' tag and older files' moved helpers: supplied where the installed torch lacks
    them and the files name them; nothing else is touched."""
    import suites_compat

    fake = {"common_utils": types.SimpleNamespace(), "common_device_type": types.SimpleNamespace(xfail="X", skip="S")}
    fake["common_methods_invocations"] = types.SimpleNamespace(skip="old skip")
    monkeypatch.setattr(suites_compat, "_module", fake.__getitem__)
    assert suites_compat.install("import torch") == []  # named nowhere: nothing supplied
    source = "from torch.testing._internal.common_methods_invocations import xfail, skip\nHardwareClassification"
    assert suites_compat.install(source) == ["common_methods_invocations.xfail", "common_utils.HardwareClassification"]
    assert fake["common_methods_invocations"].xfail == "X"  # the installed torch's own helper
    assert fake["common_methods_invocations"].skip == "old skip"  # present: left as it is
    assert fake["common_utils"].HardwareClassification.ACCELERATOR.name == "ACCELERATOR"
    assert suites_compat.install(source) == []  # already there


def test_time_limit_cuts_only_when_tests_are_left(tmp_path, monkeypatch):
    """A pass whose last test ends past the limit cut nothing (it read 'cut by the time limit' with
    every test reached); one the plugin stopped with tests left is cut."""
    import suites_plugin
    import suites_run

    out = str(tmp_path / "p-cpu.jsonl")
    monkeypatch.setenv("SUITES_DEADLINE", "0")
    monkeypatch.setenv("SUITES_OUT", out)
    session = types.SimpleNamespace(shouldstop=False, items=[types.SimpleNamespace(nodeid=n) for n in "ab"])
    monkeypatch.setattr(suites_plugin, "_session", session)
    suites_plugin.pytest_runtest_logfinish("b", None)
    assert not session.shouldstop and not os.path.exists(out + ".stopped")
    suites_plugin.pytest_runtest_logfinish("a", None)
    assert session.shouldstop and os.path.exists(out + ".stopped")

    def fake_run(cmd, **kw):  # a pytest process that ran everything, past the limit
        return types.SimpleNamespace(returncode=0)

    monkeypatch.setattr(suites_run.subprocess, "run", fake_run)
    suite = suites_source.Suite("p", "test_p.py", ("TestP",))
    opts = types.SimpleNamespace(k=None, time_limit=0, select_file=None, cache_dir_for=lambda r: None)
    done = suites_run.run_pass(suite, str(tmp_path), str(tmp_path), suites_run.PassResult("cpu", "cpu", out), opts)
    assert not done.stopped_by_time  # the stale mark of an earlier pass is removed first

    def stopping_run(cmd, **kw):  # one the plugin stopped
        open(out + ".stopped", "w").close()
        return types.SimpleNamespace(returncode=2)

    monkeypatch.setattr(suites_run.subprocess, "run", stopping_run)
    done = suites_run.run_pass(suite, str(tmp_path), str(tmp_path), suites_run.PassResult("cpu", "cpu", out), opts)
    assert done.stopped_by_time
