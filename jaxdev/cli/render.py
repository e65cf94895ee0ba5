"""Shared rendering helpers: one rich console, colours per status, machine formats."""

from __future__ import annotations

import json
import os

import yaml
from rich.console import Console

console = Console(highlight=False)

COLOURS = {
    "native": "green",
    "pass": "green",
    "autograd": "green",
    "math": "cyan",
    "decomposed": "cyan",
    "composite": "blue",
    "fallback": "yellow",
    "untraced": "yellow",
    "lost": "red",
    "lost_autograd": "red",
    "missing": "red",
    "wrong": "red",
    "dtype_mismatch": "red",
    "shape_mismatch": "red",
    "stride_mismatch": "yellow",
    "exception": "red",
    "crash": "magenta",
    "timeout": "magenta",
    "unsupported": "cyan",
    "skip": "dim",
    "fails": "red",  # aten.yaml's verdicts
    "untriable": "dim",
}


def coloured(status: str) -> str:
    colour = COLOURS.get(status)
    return f"[{colour}]{status}[/{colour}]" if colour else status


def dump(data, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True)
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


def shown(path: str | None) -> str | None:
    """A path as the user would type it: relative to the working directory when inside it."""
    if not path:
        return path
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
