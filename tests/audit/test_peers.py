"""jaxdev/audit/peers: `jaxdev coverage --backend NAME` runs the same samples through a peer backend in
workers of its own (jaxdev_cli/peer_worker.py, never loading jaxdev's device), judged by the same
check, into OUT/peers/NAME/; a peer that does not import is one sentence. CI has no torchax: the
peer here is tests/audit/fake_peer.py (sin wrong, neg without gradients), named through
$JAXDEV_AUDIT_PEERS. The torchax shim's own test is here too (peers/torchax_compat.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from jaxdev.audit import AuditError, aten_matrix, matrix, peers, sweep
from jaxdev.audit.model import Cell, Peer
from jaxdev.audit.peers import side_by_side, torchax_compat
from jaxdev.audit.samples import Unit, op_db

FAKE = os.path.join(os.path.dirname(__file__), "fake_peer.py")
# the workers of a peer load no plugin: tests/audit/plugin_ops.py registers jaxdev kernels
PEER_ENV = {peers.PEERS_ENV: f"fake={FAKE}", "JAXDEV_AUDIT_PLUGINS": ""}


@pytest.fixture(autouse=True)
def _op_db_built_with_the_plugins():
    """PEER_ENV empties the plugin list for in-process commands, and op_db() is cached once per process
    (a plugin's operators cannot register twice): built first here, it would lack the plugin OpInfos
    later tests in this process look up (tests/audit/conftest.py sets the list at import)."""
    op_db()


def _status(m, op, dtype, direction):
    return m.get(op, dtype, direction).status


def test_a_peer_runs_the_same_samples_into_its_own_files(cli, tmp_path):
    out = tmp_path / "cov"
    code, text = cli(
        "coverage", "sin", "neg", "abs", "--dtype", "float32", "--max-samples", "2", "--jobs", "2",
        "--backend", "fake", "--out", str(out), env=PEER_ENV,
    )  # fmt: skip
    assert code == 0, text
    assert f"measuring fake 1.0 on cpu (cpu): cells go to {out / 'peers' / 'fake' / 'matrix.yaml'}" in text
    assert not (out / "matrix.yaml").exists()  # jaxdev's file: never written by a peer's run
    m = matrix.load(str(out / "peers" / "fake" / "matrix.yaml"))
    assert m.peer == Peer(
        "fake", "1.0", ("forward, backward: on CPU under a mode that adds 1 to sin and detaches neg's result",)
    )
    assert _status(m, "sin", "float32", "forward") == "wrong"  # judged by the same check (float64 arbitration too)
    assert "farther from the float64 result than CPU" in m.get("sin", "float32", "forward").reason
    assert _status(m, "neg", "float32", "backward") == "lost_autograd"
    assert _status(m, "abs", "float32", "forward") == _status(m, "abs", "float32", "backward") == "pass"
    # --aten: the peer's cells aggregated, the rest tried directly through the peer, into its aten.yaml
    code, text = cli(
        "coverage", "--aten", "aten::sin", "aten::neg", "aten::sin.out", "--backend", "fake", "--jobs", "1",
        "--out", str(out), env=PEER_ENV,
    )  # fmt: skip
    assert code == 0, text
    a = aten_matrix.load(str(out / "peers" / "fake" / "aten.yaml"))
    assert a.peer.label == "fake 1.0" and a.meta["source"] == str(out / "peers" / "fake" / "matrix.yaml")
    assert a.overloads["aten::sin"].verdict == "fails" and a.overloads["aten::sin"].category == "wrong"
    assert a.overloads["aten::neg"].category == "lost_autograd"
    out_trial = a.overloads["aten::sin.out"]
    assert (out_trial.evidence, out_trial.verdict, out_trial.category) == ("direct", "fails", "wrong")
    assert all(node.route is None for node in a.overloads.values())  # a route is jaxdev's dispatcher's


def test_a_peer_that_does_not_import_is_one_sentence(cli, tmp_path):
    env = {**PEER_ENV, "JAXDEV_TEST_PEER_IMPORT": "no_such_peer_package"}
    code, text = cli("coverage", "sin", "--backend", "fake", "--out", str(tmp_path), env=env)
    assert code == 2
    assert " ".join(text.split()) == (
        "error: fake does not import in a peer worker (no --peer-path or $JAXDEV_PEER_PATH given): "
        "ModuleNotFoundError: No module named 'no_such_peer_package'; install it with `pip install --no-deps "
        "fake-peer==1.0` (--no-deps: pip leaves torch as it is), or into a folder with --target DIR and pass "
        "--peer-path DIR (or set $JAXDEV_PEER_PATH=DIR)"
    )
    assert not any(tmp_path.iterdir())


def test_torchax_missing_is_one_sentence(cli, tmp_path):
    """What a user without torchax sees (CI: torchax is no test dependency). Where it is installed, a
    package in --peer-path that raises as a missing module does stands for its absence."""
    site, out = tmp_path / "site", tmp_path / "cov"
    (site / "torchax").mkdir(parents=True)
    (site / "torchax" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torchax'\")\n")
    code, text = cli("coverage", "sin", "--backend", "torchax", "--peer-path", str(site), "--out", str(out))
    assert code == 2 and "Traceback" not in text
    assert " ".join(text.split()) == (
        f"error: torchax does not import in a peer worker (peer path {site}): ModuleNotFoundError: No module named "
        "'torchax'; install it with `pip install --no-deps torchax==0.0.13` (--no-deps: pip leaves torch as it is), "
        "or into a folder with --target DIR and pass --peer-path DIR (or set $JAXDEV_PEER_PATH=DIR)"
    )
    assert not out.exists()


def test_options_a_peer_cannot_take_are_refused(cli, tmp_path):
    code, text = cli("coverage", "sin", "--backend", "nosuch", "--out", str(tmp_path), env=PEER_ENV)
    assert code == 2 and "unknown backend 'nosuch'; known: jaxdev, fake, torchax" in text
    code, text = cli("coverage", "sin", "--mode", "fused", "--backend", "fake", "--out", str(tmp_path), env=PEER_ENV)
    assert code == 2 and "fake runs forward, backward: --mode fused runs none of those directions" in text
    code, text = cli("coverage", "sin", "--peer-path", str(tmp_path), "--out", str(tmp_path))
    assert code == 2 and "--peer-path only applies with a peer --backend" in text


def test_the_peer_worker_never_loads_jaxdevs_device():
    code = (
        "from jaxdev_cli import peer_worker; peer_worker.bare_jaxdev(); import jaxdev.audit.check, sys; "
        "assert 'jaxdev.device' not in sys.modules and not hasattr(sys.modules['jaxdev'], 'eager_mode'); "
        "import jaxdev.ops"
    )
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: jaxdev.ops would load jaxdev's device into a peer backend's worker"
    )


def _m(peer: Peer | None, status: str) -> matrix.Matrix:
    m = matrix.empty({"complete": True, "max_samples": 2})
    m.peer = peer
    m.put("neg", "float32", "backward", Cell(status, "", 1, {status: 1}), ["aten::neg"])
    return m


def test_no_file_mixes_backends(tmp_path):
    fake, other = Peer("fake", "1.0"), Peer("fake", "2.0")
    path = str(tmp_path / "matrix.yaml")
    matrix.save(_m(None, "pass"), path)  # jaxdev's
    units = [Unit("neg", "float32", "backward")]
    for how in ({"merge": True, "resume": False}, {"merge": False, "resume": True}, {"merge": False, "resume": False}):
        with pytest.raises(AuditError, match=r"holds cells of jaxdev and this run measures fake 1.0"):
            sweep.start(units, path, 2, peer=fake, **how)
    matrix.save(_m(fake, "lost_autograd"), path)
    with pytest.raises(AuditError, match=r"holds cells of fake 1.0 and this run measures fake 2.0"):
        sweep.start(units, path, 2, peer=other, merge=True, resume=False)
    with pytest.raises(AuditError, match=r"holds cells of fake 1.0 and this run measures jaxdev"):
        sweep.start(units, path, 2, merge=False, resume=False)
    with pytest.raises(AuditError, match=r"measured different backends \(fake 1.0, jaxdev\)"):
        matrix.merge([_m(None, "pass"), _m(fake, "pass")])
    assert matrix.load(path).peer == fake  # recorded, and read back
    assert peers.path("cov", "aten.yaml", "fake", matrix.CPU) == os.path.join("cov", "peers", "fake", "aten.yaml")


def test_cells_one_side_passes_and_the_other_fails_are_counted():
    ours, theirs = matrix.empty(), matrix.empty()
    for op, mine, peer in (("a", "pass", "lost_autograd"), ("b", "wrong", "pass"), ("c", "fallback", "pass"),
                           ("d", "exception", "missing"), ("e", "skip", "exception")):  # fmt: skip
        ours.put(op, "float32", "forward", Cell(mine))
        theirs.put(op, "float32", "forward", Cell(peer))
    theirs.put("f", "float32", "forward", Cell("exception"))  # jaxdev has no such cell: not compared
    found = side_by_side.pairs(ours, theirs)
    assert [p.kind for p in found] == ["ours", "theirs", "both", "neither", "other"]
    counts = side_by_side.tally(found)["all"]
    assert (counts["compared"], counts["ours"], counts["theirs"]) == (5, 1, 1)
    assert side_by_side.sentence(counts, "torchax") == (
        "jaxdev passes 1 cells torchax fails; torchax passes 1 jaxdev fails (of 5 cells both measured)"
    )


def test_shim_resolves_only_removed_named_overloads():
    torchax_compat.install()
    try:
        assert isinstance(torch.ops.aten.prod.dim_Dimname, torchax_compat.MissingOverload)
        assert torch.ops.aten.prod.dim_Dimname is torch.ops.aten.prod.dim_Dimname  # one per name
        with pytest.raises(AttributeError):
            _ = torch.ops.aten.prod.no_such_overload
    finally:
        torchax_compat.uninstall()
    with pytest.raises(AttributeError):
        _ = torch.ops.aten.prod.dim_Dimname


def test_direct_trials_call_an_overload_as_a_user_does():
    """calls.by_schema: positional schema arguments positionally (one left out before a given one as
    its default), keyword-only ones by keyword: what a peer intercepting the call in Python takes."""
    from jaxdev.audit.calls import by_schema, invoke

    x, y, out = torch.ones(2), torch.full((2,), 2.0), torch.empty(0)
    aten = torch.ops.aten
    assert by_schema(aten.add.Tensor, {"self": x, "other": y, "alpha": 2}) == ([x, y], {"alpha": 2})
    assert by_schema(aten.clamp.default, {"self": x, "max": 0.5}) == ([x, None, 0.5], {})
    assert by_schema(aten.cat.out, {"tensors": [x, y], "out": out}) == ([[x, y]], {"out": out})
    assert by_schema(aten.sum.dim_IntList, {"self": x, "dim": [0], "dtype": None}) == ([x, [0]], {"dtype": None})
    assert invoke(aten.clamp.default, {"self": x, "max": 0.5}).tolist() == [0.5, 0.5]
