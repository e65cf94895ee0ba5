"""`jaxdev report`'s files: summary.md and junit.xml (report.py) and index.html (report_html.py),
each written atomically into one folder. Here, above both, so neither imports the other's caller."""

from __future__ import annotations

import os

from jaxdev.audit import report, report_html, report_peers


def write(src: report.Sources, out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    baseline = (src.baseline_path, src.baseline) if src.baseline is not None else None
    reference = (src.reference_path, src.reference) if src.reference is not None else None
    files = {
        "summary.md": report.markdown(src.matrix, src.matrix_path, baseline, reference, src.platforms, src.peers),
        "index.html": report_html.page(src),
        "junit.xml": report.junit(src.matrix),
    }
    for path, peer_m in src.peers:  # peers/NAME.md: every OpInfo and dtype beside the peer's
        name = os.path.join("peers", f"{peer_m.peer.name}.md")
        files[name] = report_peers.page(src.matrix_path, src.matrix, path, peer_m)
    paths = []
    for name, text in files.items():
        path = os.path.join(out_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        paths.append(path)
    return paths
