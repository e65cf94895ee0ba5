"""The runner's tables (rich) and its saved summary (JSON)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table
from suites_results import Comparison, group_causes


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _factors(passes, attr: str) -> list[str]:
    """Each jax pass's time over CPU's ('cold', 'warm'), by wall time or by time in tests."""
    t = {p.label: getattr(p, attr) for p in passes}
    cpu = t.get("cpu")
    return [f"{t[label] / cpu:.1f}x" if label in t and cpu else "-" for label in ("jax cold", "jax warm")]


def summary_table(rows: list[tuple[str, Comparison, list]]) -> Table:
    table = Table(title="PyTorch's suites: jax against CPU (target: jax passes >= 98 % of CPU's passes)")
    for name in ("suite", "CPU passed", "jax passed", "jax/CPU", "jax skipped", "not reached"):
        table.add_column(name, justify="left" if name == "suite" else "right")
    for name in ("CPU s", "jax cold s", "jax warm s", "cold x", "warm x", "cold x tests", "warm x tests"):
        table.add_column(name, justify="right")
    for title, comp, passes in rows:
        wall = {p.label: f"{p.wall_s:.0f}" for p in passes}
        table.add_row(
            title, str(comp.cpu_passed), str(comp.jax_passed), _ratio(comp.ratio), str(comp.jax_skipped),
            str(comp.not_reached), *(wall.get(label, "-") for label in ("cpu", "jax cold", "jax warm")),
            *_factors(passes, "wall_s"), *_factors(passes, "tests_s"),
        )  # fmt: skip
    return table


def causes_table(title: str, comp: Comparison, top: int) -> Table:
    table = Table(title=f"{title}: jax-only failures by cause ({len(comp.jax_only)})")
    table.add_column("tests", justify="right")
    table.add_column("cause")
    table.add_column("one of them")
    causes = group_causes(comp.jax_only)
    for cause in causes[:top]:
        table.add_row(str(cause.count), cause.cause, cause.example.split("::", 1)[-1])
    if len(causes) > top:
        rest = sum(c.count for c in causes[top:])
        table.add_row(str(rest), f"... {len(causes) - top} more causes (see the summary JSON)", "")
    return table


def print_report(rows, top: int, console: Console | None = None) -> None:
    console = console or Console(width=200)
    console.print(summary_table(rows))
    for title, comp, _ in rows:
        if comp.skip_reasons:
            reasons = "; ".join(f"{n} x {why}" for why, n in comp.skip_reasons.most_common())
            console.print(f"{title}: jax skipped {comp.jax_skipped} of CPU's passes: {reasons}")
        if comp.jax_only:
            console.print(causes_table(title, comp, top))


def save_summary(path: str, header: dict, rows) -> None:
    suites = []
    for title, comp, passes in rows:
        suites.append(
            {
                "suite": title,
                "cpu_passed": comp.cpu_passed,
                "jax_passed": comp.jax_passed,
                "ratio": comp.ratio,
                "jax_skipped": comp.jax_skipped,
                "not_reached": comp.not_reached,
                "cpu_only_failures": comp.cpu_only_failures,
                "jax_skip_reasons": dict(comp.skip_reasons),
                "passes": [
                    {
                        "label": p.label,
                        "wall_s": round(p.wall_s, 1),
                        "tests_s": round(p.tests_s, 1),
                        "restarts": p.restarts,
                        "cut": p.stopped_by_time,
                    }
                    for p in passes
                ],
                "causes": [{"cause": c.cause, "count": c.count, "tests": c.tests} for c in group_causes(comp.jax_only)],
            }
        )
    with open(path, "w") as f:
        json.dump({**header, "suites": suites}, f, indent=1)
