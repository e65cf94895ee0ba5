"""The committed coverage files are in step with this checkout and with each other (issue 38 item 6):
every overload of coverage/aten.yaml routes to the device as its recorded `route` says, and every
verdict it took from OpInfo cells is what coverage/matrix.yaml's cells give. A kernel added or
removed, or a matrix re-run, without refreshing aten.yaml fails here, with the commands that refresh it."""

from __future__ import annotations

import os

import pytest

from jaxdev.audit import freshness

ATEN = os.path.join(os.path.dirname(__file__), "..", "..", "coverage", "aten.yaml")
MATRIX = os.path.join(os.path.dirname(ATEN), "matrix.yaml")


@pytest.mark.skipif(not os.path.exists(ATEN), reason="no committed coverage/aten.yaml in this checkout")
def test_aten_yaml_routes_are_this_checkouts():
    stale = freshness.stale_routes(ATEN)
    assert not stale, (
        f"coverage/aten.yaml is stale for {len(stale)} overload(s) (a kernel came or went since it was built); "
        "refresh each as said, then commit coverage/:\n" + "\n".join(map(str, stale))
    )


@pytest.mark.skipif(not os.path.exists(ATEN), reason="no committed coverage/aten.yaml in this checkout")
def test_aten_yaml_verdicts_are_what_the_matrix_cells_give():
    stale = freshness.stale_verdicts(ATEN, MATRIX)
    assert not stale, (
        f"coverage/aten.yaml was not re-aggregated after coverage/matrix.yaml changed ({len(stale)} verdicts); "
        "refresh each as said, then commit coverage/:\n" + "\n".join(map(str, stale))
    )


def test_a_verdict_the_cells_no_longer_give_is_found(tmp_path):
    from jaxdev.audit import aten_matrix, matrix
    from jaxdev.audit.model import AtenNode, Cell

    m = matrix.empty({"complete": True})
    m.put("sin", "float32", "forward", Cell("wrong", "differs", 1), ["aten::sin"])  # re-run since: now wrong
    matrix.save(m, str(tmp_path / "matrix.yaml"))
    node = AtenNode("pass", "opinfo", "every measured cell of 1 OpInfo(s) passes", opinfos=["sin"])
    aten_matrix.save(aten_matrix.AtenMatrix({}, {"aten::sin": node}), str(tmp_path / "aten.yaml"))
    (stale,) = freshness.stale_verdicts(str(tmp_path / "aten.yaml"), str(tmp_path / "matrix.yaml"))
    assert str(stale).startswith("aten::sin: recorded pass, now fails (wrong) by the cells of ")


def test_a_route_changed_since_the_file_was_built_is_found(tmp_path):
    from jaxdev.audit import aten_matrix
    from jaxdev.audit.model import AtenNode, Route

    node = AtenNode("fallback", "opinfo", "fallback in OpInfo sin float32 forward", opinfos=["sin"])
    node.route = Route("fallback", "autograd")  # aten::sin has a jax kernel: the record is stale
    kept = AtenNode("pass", "direct", "direct trial: equal to CPU", route=Route("native", "autograd"))
    path = str(tmp_path / "aten.yaml")
    aten_matrix.save(aten_matrix.AtenMatrix({}, {"aten::sin": node, "aten::cos": kept}), path)
    (stale,) = freshness.stale_routes(path)
    assert str(stale) == (
        "aten::sin: recorded fallback/autograd, now native/autograd "
        "(refresh: jaxdev coverage sin && jaxdev coverage --aten aten::sin)"
    )
