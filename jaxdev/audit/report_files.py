"""`jaxdev report`'s files: summary.md and junit.xml (report.py) and index.html (report_html.py),
each written atomically into one folder. Here, above both, so neither imports the other's caller."""

from __future__ import annotations

import os

from jaxdev.audit import report, report_html


def write(src: report.Sources, out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    baseline = (src.baseline_path, src.baseline) if src.baseline is not None else None
    reference = (src.reference_path, src.reference) if src.reference is not None else None
    files = {
        "summary.md": report.markdown(src.matrix, src.matrix_path, baseline, reference, src.platforms),
        "index.html": report_html.page(src),
        "junit.xml": report.junit(src.matrix),
    }
    paths = []
    for name, text in files.items():
        path = os.path.join(out_dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        paths.append(path)
    return paths
