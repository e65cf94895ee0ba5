"""A run narrowed to some OpInfos, dtypes or a shard keeps every other cell of the matrix it writes
into (issue 30: the README's `jaxdev coverage sin add --dtype float32` used to replace the 9,529
cells of coverage/matrix.yaml by its own). Every test works on a copy: the committed coverage/
files are never written."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from jaxdev.audit import AuditError, aten_matrix, matrix, sweep
from jaxdev.audit.model import Cell
from jaxdev.audit.samples import Unit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMITTED = os.path.join(ROOT, "coverage", "matrix.yaml")
COMMITTED_ATEN = os.path.join(ROOT, "coverage", "aten.yaml")


def _copy(src: str, folder) -> str:
    if not os.path.exists(src):
        pytest.skip(f"no committed {os.path.basename(src)} in this checkout")
    dst = os.path.join(str(folder), os.path.basename(src))
    shutil.copyfile(src, dst)
    return dst


def _cells(m: matrix.Matrix) -> dict:
    return {(c.op, c.dtype, c.direction): c.cell for c in m.cells()}


def test_readme_example_keeps_every_other_cell(cli, tmp_path):
    path = _copy(COMMITTED, tmp_path)
    before = matrix.load(path)
    # the README's `jaxdev coverage sin add --dtype float32`, narrowed to one op to stay quick
    code, out = cli("coverage", "sin", "--dtype", "float32", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    after = matrix.load(path)
    ran = {("sin", "float32", "forward"), ("sin", "float32", "backward")}
    old, new = _cells(before), _cells(after)
    assert set(new) == set(old)  # nothing dropped, nothing invented
    assert {k: v for k, v in new.items() if k not in ran} == {k: v for k, v in old.items() if k not in ran}
    assert {op: n.aten for op, n in after.ops.items() if op != "sin"} == {
        op: n.aten for op, n in before.ops.items() if op != "sin"
    }
    assert set(before.aten("sin")) <= set(after.aten("sin"))
    # the sweep that made the file still describes it; this run is recorded beside it
    for key in ("complete", "max_samples", "timeout_s", "wall_s"):
        assert getattr(after.run, key) == getattr(before.run, key), key
    assert after.run.samples == sum(cell.samples for cell in new.values())
    assert after.run.this_run.units == 2 and after.run.this_run.scope == {"ops": ["sin"], "dtypes": ["float32"]}
    # the summary: this run's 2 cells, then the file's (the kept compile cells only there)
    text = " ".join(out.split())
    mine, _, held = text.partition(f"now holds {len(old):,} cells:")
    assert "(merged: its other cells kept)" in mine and "this run, 2 cells:" in mine
    assert re.search(r"forward \w+ 1 ", mine) and re.search(r"backward \w+ 1 ", mine) and "compile" not in mine
    assert "compile" in held


def test_a_scoped_run_refuses_a_file_it_cannot_join(cli, tmp_path):
    path = _copy(COMMITTED, tmp_path)
    text = Path(path).read_text()
    code, out = cli("coverage", "sin", "--dtype", "float32", "--max-samples", "1", "--out", str(tmp_path))
    assert code == 2 and "was run with --max-samples 3" in out and "--out DIR" in out, out
    assert Path(path).read_text() == text
    other = matrix.load(path)
    other.versions = {**other.versions, "torch": "1.0.0"}
    matrix.save(other, path)
    code, out = cli("coverage", "sin", "--dtype", "float32", "--out", str(tmp_path))
    assert code == 2 and "measured with torch 1.0.0" in out, out
    code, out = cli("coverage", "sin", "--out", str(tmp_path / "other.yaml"))
    assert code == 2 and "--out is a folder" in out, out


def _saved(tmp_path, cells, **run) -> str:
    m = matrix.empty({"complete": True, "max_samples": 3, **run})
    for op, dtype, direction, status in cells:
        m.put(op, dtype, direction, Cell(status, samples=1), [f"aten::{op}"])
    path = str(tmp_path / "matrix.yaml")
    matrix.save(m, path)
    return path


def test_only_a_full_run_replaces_its_directions(tmp_path):
    path = _saved(
        tmp_path,
        [
            ("a", "float32", "forward", "pass"),
            ("b", "float32", "forward", "wrong"),
            ("a", "float32", "compile", "pass"),
        ],
    )
    units = [Unit("a", "float32", "forward")]
    full, todo, kept = sweep.start(units, path, 3, resume=False, merge=False)
    assert not kept and todo == units
    assert [(c.op, c.direction) for c in full.cells()] == [("a", "compile")]  # b's forward cell: gone, by design
    scoped, todo, kept = sweep.start(units, path, 3, resume=False, merge=True)
    assert kept and todo == units and len(list(scoped.cells())) == 3  # every cell until replaced
    with pytest.raises(AuditError, match="--max-samples 3"):
        sweep.start(units, path, 2, resume=False, merge=True)


def test_merging_shards_keeps_what_they_do_not_hold(tmp_path):
    existing = matrix.load(_saved(tmp_path, [("a", "float32", "forward", "pass"), ("b", "float32", "forward", "pass")]))
    part = matrix.empty({"complete": True, "shard": "1/2"})
    part.put("a", "float32", "forward", Cell("wrong", samples=1))
    merged = matrix.combine([part], matrix.load(str(tmp_path / "matrix.yaml")), "m.yaml")
    assert merged.get("a", "float32", "forward").status == "wrong"
    assert merged.get("b", "float32", "forward") == existing.get("b", "float32", "forward")
    other = matrix.empty({"complete": True, "shard": "2/2"})
    other.put("c", "float32", "forward", Cell("pass", samples=1))
    assert matrix.full_sweep([part, other]) and not matrix.full_sweep([part])
    whole = matrix.combine([part, other], existing, "m.yaml")  # every shard of a full sweep: it replaces
    assert {c.op for c in whole.cells()} == {"a", "c"}


def test_a_scoped_aten_run_keeps_every_other_overload(cli, tmp_path):
    path = _copy(COMMITTED_ATEN, tmp_path)
    before = aten_matrix.load(path)
    source = str(tmp_path / "opinfo-matrix.yaml")
    m = matrix.empty({"complete": True})
    m.put("sin", "float32", "forward", Cell("pass", samples=1), ["aten::sin"])
    matrix.save(m, source)
    code, out = cli(
        "coverage", "--aten", "aten::sin.default", "--matrix", source, "--jobs", "1", "--out", str(tmp_path)
    )
    assert code == 0, out
    after = aten_matrix.load(path)
    assert set(after.overloads) == set(before.overloads)
    assert {k: v for k, v in after.overloads.items() if k != "aten::sin"} == {
        k: v for k, v in before.overloads.items() if k != "aten::sin"
    }
    assert after.meta["direct"] == before.meta["direct"]
    assert after.meta["this_run"]["scope"] == ["aten::sin.default"]
    assert "scope" not in after.meta  # the file still covers every overload
    text = " ".join(out.split())
    assert "this run, 1 overloads: pass 1" in text and f"now holds {len(before.overloads)} overloads" in text
