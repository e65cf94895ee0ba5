"""Shared rendering helpers: one rich console, statuses in their colours, machine formats."""

from __future__ import annotations

import json
import os

import yaml
from rich.console import Console

from jaxdev.audit import facts

console = Console(highlight=False)


def coloured(status: str) -> str:
    """The word in its colour from the status table (facts.STATUSES, facts.WORD_COLOURS)."""
    colour = facts.colour(status)
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


def print_platform(platform, path: str, peer=None) -> None:
    """On a platform other than CPU, or for a peer backend (peers.Selected), a line saying where its
    cells go (jaxdev's run on CPU says nothing new)."""
    what = f"{peer.record.label} " if peer is not None else ""
    if platform.name != "cpu" or peer is not None:
        console.print(f"measuring {what}on {platform.label} ({platform.name}): cells go to {path}", soft_wrap=True)
