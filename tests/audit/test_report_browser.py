"""The HTML report in a real headless browser (Debian's `chromium`): the page loads without script
errors, its script draws the rows, and the filters, tabs and detail rows named in the URL hash
apply at load. Skipped where no chromium is installed (scripts/setup.sh installs it in CI)."""

import os
import re
import shutil
import subprocess

import pytest
import yaml

from jaxdev.audit import matrix
from jaxdev.audit.model import Cell, Platform

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")) if p), None
)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no chromium binary on PATH (apt-get install chromium; scripts/setup.sh does in CI)"
)

# The layout of coverage/aten.yaml (jaxdev.audit.aten_matrix): routes, reaching OpInfos, verdict, cells.
ATEN = {
    "schema": 1,
    "meta": {"counts": {"overloads": 3, "verdicts": {"pass": 0, "fails": 1, "fallback": 1, "untriable": 1}}},
    "overloads": {
        "aten::sin": {
            "route": {"PrivateUse1": "native", "AutogradPrivateUse1": "autograd"},
            "opinfos": ["sin"],
            "evidence": "opinfo",
            "verdict": "fails",
            "category": "lost_autograd",
            "reason": "lost_autograd in OpInfo sin float32 backward: grad is None",
            "cells": {"float32": {"forward": "pass", "backward": "lost_autograd"}},
        },
        "aten::cos": {
            "route": {"PrivateUse1": "fallback", "AutogradPrivateUse1": "autograd"},
            "opinfos": ["cos"],
            "evidence": "opinfo",
            "verdict": "fallback",
            "reason": "fallback in OpInfo cos float64 forward",
            "cells": {"float64": {"forward": "fallback"}},
        },
        "aten::_made_up.out": {
            "route": {"PrivateUse1": "missing", "AutogradPrivateUse1": "missing"},
            "opinfos": [],
            "evidence": "none",
            "verdict": "untriable",
            "category": "no_cpu_kernel",
            "reason": "CPU has no kernel",
            "cells": {},
        },
    },
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Two reports of a tiny matrix: with a baseline and an aten matrix, and without either."""
    from jaxdev.audit import report, report_files

    tmp = tmp_path_factory.mktemp("report")
    m = matrix.empty({"complete": True, "samples": 6})
    m.put("sin", "float32", "forward", Cell("pass", "", samples=3), ["aten::sin"])
    m.put(
        "sin",
        "float32",
        "backward",
        Cell("lost_autograd", "grad is None", repro="sin float32 backward: SampleInput(<x>)"),
        ["aten::sin"],
    )
    m.put("cos", "float64", "forward", Cell("fallback", "CPU fallback for aten::cos"), ["aten::cos"])
    m.put("linalg.det", "float32", "forward", Cell("wrong", "max abs err 0.5"), ["aten::linalg_det"])
    base = matrix.empty({"complete": True})
    base.put("sin", "float32", "backward", Cell("pass", ""))
    base.put("cos", "float64", "forward", Cell("fallback", "CPU fallback for aten::cos"))
    (tmp / "aten.yaml").write_text(yaml.safe_dump(ATEN))
    full = report.Sources(
        m, "matrix.yaml", base, "baseline.yaml", report.load_aten(str(tmp / "aten.yaml")), "aten.yaml"
    )
    report_files.write(full, str(tmp / "full"))
    report_files.write(report.Sources(m, "matrix.yaml"), str(tmp / "bare"))
    tpu = matrix.empty({"complete": True, "samples": 2})
    tpu.platform = Platform("tpu", "TPU v5 lite")
    tpu.put("sin", "float32", "forward", Cell("wrong", "max abs err 0.01 on the TPU", samples=2), ["aten::sin"])
    report_files.write(report.Sources(m, "matrix.yaml", platforms=[("tpu/matrix.yaml", tpu)]), str(tmp / "platforms"))
    return tmp


def load(path, hash_="", screenshot=None):
    """(DOM after the page's scripts ran, less the scripts' own text; console lines the page logged)."""
    profile = os.path.join(os.path.dirname(path), "profile")
    args = [BROWSER, "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={profile}"]
    args += ["--enable-logging=stderr", "--v=0", "--window-size=1400,1000"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    run = subprocess.run([*args, f"file://{path}#{hash_}"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return run.stdout.split("<script")[0], console


def rows(dom):
    return re.findall(r'<tr class="row[^"]*" [^>]*data-name="([^"]+)"', dom)


def test_page_draws_rows_without_script_errors(pages):
    dom, console = load(pages / "full" / "index.html")
    assert console == []
    assert 'data-rendered="opinfo"' in dom and 'data-rows="3"' in dom
    assert rows(dom) == ["cos", "linalg.det", "sin"]
    assert 'class="c s-lost_autograd first" data-c="1">G<' in dom  # one cell per (dtype, direction), coloured by status


def test_filters_in_the_hash_apply_at_load(pages):
    page = pages / "full" / "index.html"
    assert rows(load(page, "status=lost_autograd")[0]) == ["sin"]
    assert rows(load(page, "status=wrong,fallback&dir=forward")[0]) == ["cos", "linalg.det"]
    assert rows(load(page, "family=linalg")[0]) == ["linalg.det"]
    assert rows(load(page, "dtype=float64")[0]) == ["cos"]
    assert rows(load(page, "q=aten::sin")[0]) == ["sin"]  # search reaches the aten overloads an OpInfo reached
    dom, console = load(page, "view=list&status=fallback,wrong")
    assert console == [] and rows(dom) == ["linalg.det", "cos"]  # the cell list: worst first
    assert "max abs err 0.5" in dom


def test_detail_row_shows_reason_repro_and_rerun(pages):
    dom, console = load(pages / "full" / "index.html", "open=opinfo|sin|float32|backward")
    assert console == []
    detail = dom.split('<tr class="detail">')[1].split("</tr>")[0]
    assert "grad is None" in detail and "sin float32 backward: SampleInput(&lt;x&gt;)" in detail
    assert "jaxdev coverage 'sin' --dtype float32 --jobs 1 --out /tmp/cov" in detail
    assert "baseline:" in detail and "new failure" in detail  # the cell changed since the baseline


def test_aten_tab_and_changes_since_the_baseline(pages):
    page = pages / "full" / "index.html"
    dom, console = load(page, "tab=aten")
    assert console == [] and 'data-rendered="aten"' in dom
    assert rows(dom) == ["aten::_made_up.out", "aten::cos", "aten::sin"]
    assert "native / autograd" in dom and '<span class="badge s-skip">untriable</span>' in dom  # routes, verdict
    assert rows(load(page, "tab=aten&route.PrivateUse1=fallback")[0]) == ["aten::cos"]
    assert rows(load(page, "tab=aten&verdict=fails&status=lost_autograd")[0]) == ["aten::sin"]
    dom, console = load(page, "tab=aten&open=aten|aten::sin|float32|backward")
    detail = dom.split('<tr class="detail">')[1].split("</tr>")[0]
    assert console == [] and "grad is None" in detail and "sin</button>" in detail  # reason, and the OpInfo
    dom, console = load(page, "tab=changes")
    assert console == [] and rows(dom) == ["sin"]
    assert "new failure" in dom and "2 cells of this matrix are not in the baseline" in dom


def test_page_without_baseline_or_aten_matrix_and_without_scripts(pages):
    dom, console = load(pages / "bare" / "index.html", "tab=aten")
    assert console == [] and "No aten matrix" in dom
    assert rows(dom) == ["aten::cos", "aten::linalg_det", "aten::sin"]  # from the matrix's aten: lists
    assert "Changed since" not in dom
    html = (pages / "full" / "index.html").read_text()
    static = html.split("<main")[0]  # what a reader without scripts gets
    assert "<td>lost_autograd</td>" in static and "Changed since the baseline (1)" in static
    assert "http://" not in html and "https://" not in html  # nothing fetched


def test_other_platforms_rows_with_a_platform_filter(pages):
    page = pages / "platforms" / "index.html"
    dom, console = load(page)
    assert console == [] and rows(dom) == ["cos", "linalg.det", "sin", "sin"]  # sin on cpu, and on the TPU
    assert '<span class="sub plat">TPU v5 lite (tpu)</span>' in dom and "all platforms" in dom
    assert rows(load(page, "platform=TPU v5 lite (tpu)")[0]) == ["sin"]
    dom, console = load(page, "platform=cpu&status=wrong&view=list")
    assert console == [] and rows(dom) == ["linalg.det"] and "<th>platform</th>" in dom
    dom, console = load(page, "open=opinfo|sin @TPU v5 lite (tpu)|float32|forward")
    assert console == [] and "max abs err 0.01 on the TPU" in dom.split('<tr class="detail">')[1]


def test_screenshot(pages):
    shot = pages / "report.png"
    load(pages / "full" / "index.html", "status=lost_autograd,wrong&open=opinfo|sin|float32|backward", shot)
    assert shot.stat().st_size > 10_000
