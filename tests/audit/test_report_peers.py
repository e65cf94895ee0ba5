"""report_peers.py: a peer backend's matrix beside jaxdev's adds a section to summary.md (the cells
one side passes and the other fails, counted per direction), OUT/peers/NAME.md (every OpInfo and
dtype, jaxdev's status beside the peer's) and the peer's rows to the page."""

from __future__ import annotations

from jaxdev.audit import matrix, report, report_files, report_html
from jaxdev.audit.model import Cell, Peer

FAKE = Peer("fake", "1.0", ("forward: how it ran",))


def _matrix(peer: Peer | None, statuses: dict) -> matrix.Matrix:
    m = matrix.empty({"complete": True, "max_samples": 2})
    m.peer = peer
    for (op, dtype, direction), status in statuses.items():
        m.put(op, dtype, direction, Cell(status, "why" if status != "pass" else "", 1, {status: 1}), [f"aten::{op}"])
    return m


def test_the_report_puts_a_peer_beside_jaxdev(tmp_path):
    ours = _matrix(None, {("tanh", "float32", "forward"): "pass", ("tanh", "float32", "backward"): "pass",
                          ("erf", "float64", "forward"): "wrong", ("erf", "int64", "forward"): "pass"})  # fmt: skip
    theirs = _matrix(FAKE, {("tanh", "float32", "forward"): "pass", ("tanh", "float32", "backward"): "lost_autograd",
                            ("erf", "float64", "forward"): "pass"})  # fmt: skip
    src = report.Sources(ours, "coverage/matrix.yaml")
    src.peers = [("coverage/peers/fake/matrix.yaml", theirs)]
    text = report.markdown(ours, src.matrix_path, peers=src.peers)
    assert "## beside fake 1.0" in text and "- forward: how it ran" in text
    assert "**jaxdev passes 1 cells fake fails; fake passes 1 jaxdev fails (of 3 cells both measured).**" in text
    assert "| backward | 1 | 1 | 0 | 1 | 0 | 0 |" in text
    assert "- `tanh` float32 backward: lost_autograd (why)" in text
    assert "- `erf` float64 forward: wrong (why)" in text
    paths = report_files.write(src, str(tmp_path))
    page = (tmp_path / "peers" / "fake.md").read_text()
    assert str(tmp_path / "peers" / "fake.md") in paths
    assert "| `tanh` | float32 | pass / pass | **pass / lost_autograd** |" in page
    assert "| `erf` | float64 | **wrong / pass** |  |" in page and "int64" not in page  # only cells both measured
    assert report_html.data(src)["platforms"] == ["jaxdev on cpu", "fake 1.0 on cpu"]
