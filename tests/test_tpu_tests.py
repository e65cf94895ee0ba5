"""scripts/tpu_tests.py, the TPU test runner: its chunks cover the collected tests once, its progress files
name the test a crashed chunk was running, and its merge counts outcomes per file; and the cpu_fact helper
that skips tests of XLA's CPU backend elsewhere."""

from __future__ import annotations

import importlib.util
import json

import jaxdev_testing
import pytest
from jaxdev_testing import ROOT

_spec = importlib.util.spec_from_file_location("tpu_tests", ROOT / "scripts" / "tpu_tests.py")
tpu_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tpu_tests)


def test_chunks_cover_every_test_once_in_order():
    ids = [f"tests/t{i // 7}.py::test_{i}" for i in range(103)]
    for n in (1, 4, 40, 103):
        chunks = [tpu_tests.chunk_ids(ids, k, n) for k in range(1, n + 1)]
        assert [i for chunk in chunks for i in chunk] == ids
        assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def _progress(path, lines):
    path.write_text("\n".join(lines) + "\n")


def _end(nodeid, outcome, detail=""):
    return "END " + json.dumps([nodeid, outcome, 0.5, detail])


def test_a_crash_names_the_test_that_was_running(tmp_path):
    path = tmp_path / "chunk.progress"
    _progress(path, ["START a::x", _end("a::x", "passed"), "START a::y"])
    assert tpu_tests.read_progress(path) == ({"a::x": ["passed", 0.5, ""]}, "a::y")
    _progress(path, ["START a::x", _end("a::x", "passed"), _end("a::x", "error", "teardown broke")])
    assert tpu_tests.read_progress(path) == ({"a::x": ["error", 0.5, "teardown broke"]}, None)


def test_merge_counts_outcomes_per_file_and_lists_crashes(tmp_path, monkeypatch):
    monkeypatch.setattr(tpu_tests, "STATE", tmp_path)
    _progress(tmp_path / "chunk-001-of-002.progress", ["START f.py::a", _end("f.py::a", "passed"), "START f.py::b"])
    (tmp_path / "chunk-001-of-002.json").write_text(json.dumps({"crashed": ["f.py::b"], "how": {"f.py::b": "exit -6"}}))
    _progress(
        tmp_path / "chunk-002-of-002.progress", [_end("g.py::c", "failed", "assert 1 == 2"), _end("g.py::d", "skipped")]
    )
    (tmp_path / "chunk-002-of-002.json").write_text(json.dumps({"crashed": [], "finished": True}))
    out = tmp_path / "out"
    tpu_tests.merge(["f.py::a", "f.py::b", "g.py::c", "g.py::d", "g.py::e"], 2, out)
    summary = (out / "tpu-tests-summary.txt").read_text().splitlines()
    assert summary[1].split() == ["f.py", "1", "0", "0", "0", "1"]
    assert summary[2].split() == ["g.py", "0", "1", "1", "0", "0"]
    assert "4 of 5 collected" in summary[3]
    assert summary[4].startswith("crash: f.py::b (exit -6")
    failures = (out / "tpu-tests-failures.txt").read_text()
    assert "g.py::c: failed: assert 1 == 2" in failures and "f.py::b: crashed" in failures
    assert json.loads((out / "tpu-tests.json").read_text())["outcomes"]["g.py::d"][0] == "skipped"


def test_cpu_fact_skips_off_the_cpu_backend(monkeypatch):
    monkeypatch.setattr(jaxdev_testing, "PLATFORM", "tpu")
    with pytest.raises(pytest.skip.Exception, match="a fact of XLA's CPU backend, not of tpu: subnormals kept"):
        jaxdev_testing.cpu_fact("subnormals kept")
    monkeypatch.setattr(jaxdev_testing, "PLATFORM", "cpu")
    jaxdev_testing.cpu_fact("subnormals kept")  # on CPU the test goes on
