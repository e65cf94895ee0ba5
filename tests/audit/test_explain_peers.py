"""explain_peers.py: `jaxdev explain OP --peers` gives jaxdev's verdict beside each peer backend's and
the OpInfo's cells side by side, from files beside the ones explain reads (coverage/peers/NAME/);
synthetic files here (tanh's backward loses its gradients on the peer), as CI has no torchax."""

from __future__ import annotations

import pytest

from jaxdev.audit import aten_matrix, matrix, peers
from jaxdev.audit.model import CPU, AtenNode, Cell, Peer, Route

FAKE = Peer("fake", "1.0", ("forward: how it ran",))
LOST = "LostAutograd: 1 of 1 outputs have no grad_fn (CPU's eager outputs have one)"


def _matrix(peer: Peer | None) -> matrix.Matrix:
    m = matrix.empty({"complete": True, "max_samples": 2})
    m.peer = peer
    m.put("tanh", "float32", "forward", Cell("pass", "", 2, {"pass": 2}), ["aten::tanh"])
    status, reason = ("lost_autograd", LOST) if peer else ("pass", "")
    m.put("tanh", "float32", "backward", Cell(status, reason, 2, {status: 2}), ["aten::tanh_backward"])
    m.put("tanh", "float64", "forward", Cell("wrong" if peer else "pass", "output differs", 2, {}), ["aten::tanh"])
    return m


def _aten(peer: Peer | None) -> aten_matrix.AtenMatrix:
    node = AtenNode("pass", "opinfo", "every measured cell of 1 OpInfo(s) passes", opinfos=["tanh"])
    node.cells = {"float32": {"forward": "pass", "backward": "pass"}}
    if peer:
        node.verdict, node.category, node.reason = "fails", "lost_autograd", f"lost_autograd in OpInfo tanh: {LOST}"
    else:
        node.route = Route("native", "autograd")
    return aten_matrix.AtenMatrix.of_run({"aten::tanh": node}, "m.yaml", {}, platform=CPU, peer=peer)


@pytest.fixture
def beside_a_peer(tmp_path, monkeypatch):
    cov = tmp_path / "coverage"
    matrix.save(_matrix(None), str(cov / "matrix.yaml"))
    aten_matrix.save(_aten(None), str(cov / "aten.yaml"))
    matrix.save(_matrix(FAKE), peers.path(str(cov), "matrix.yaml", "fake", CPU))
    aten_matrix.save(_aten(FAKE), peers.path(str(cov), "aten.yaml", "fake", CPU))
    monkeypatch.chdir(tmp_path)
    return cov


def test_explain_peers_puts_both_verdicts_and_cells_side_by_side(cli, beside_a_peer):
    code, out = cli("explain", "aten::tanh", "--peers")
    assert code == 0, out
    lines = [line.strip() for line in out.splitlines()]
    assert f"backends  pass on jaxdev; fails (lost_autograd) on fake 1.0: lost_autograd in OpInfo tanh: {LOST}" in lines
    assert "jaxdev passes 2 cells fake fails; fake passes 0 jaxdev fails (of 3 cells both measured)" in lines
    assert f"float32 backward: pass on jaxdev; lost_autograd on fake 1.0: {LOST}" in lines
    assert any(line.startswith("float32") and "pass / lost_autograd" in line for line in lines)  # the grid
    code, out = cli("explain", "aten::tanh")
    assert code == 0 and "fake" not in out  # without --peers, the answer as before


def test_explain_peers_without_peer_files_is_one_sentence(cli, beside_a_peer):
    (beside_a_peer / "peers" / "fake" / "matrix.yaml").unlink()
    (beside_a_peer / "peers" / "fake" / "aten.yaml").unlink()
    code, out = cli("explain", "aten::tanh", "--peers")
    assert code == 2
    assert " ".join(out.split()) == (
        "error: no peer backend's files beside coverage (peers/NAME/aten.yaml, matrix.yaml): "
        "`jaxdev coverage --backend torchax` and `--aten --backend torchax` make them"
    )
