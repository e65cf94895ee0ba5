"""Where an optimized HLO module's time goes, by the Python line each instruction came from: the
module text's stack-frame tables (FileNames, FunctionNames, FileLocations, StackFrames) resolve an
instruction's stack_frame_id to its frames, and a TPU compiler's `estimated_cycles` (its cost model,
in each entry instruction's backend_config) weighs it. benchmarks/lm_programs.py prints these for
jaxdev's program and the hand-written `jax.jit` one side by side.
"""

from __future__ import annotations

import collections
import re

_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_SKIP_FILES = ("site-packages", "lm_programs.py", "tpu_aot.py", "deviceless.py", "/graphs/", "/fused/")


def tables(text: str) -> dict[str, dict[int, str]]:
    found, section = {name: {} for name in _TABLES}, None
    for line in text.split("\n"):
        if line in found:
            section = line
        elif line.startswith(("%", "ENTRY", "HloModule")) and section == "StackFrames":
            break
        elif section and line[:1].isdigit():
            key, value = line.split(" ", 1)
            found[section][int(key)] = value
    return found


def frames(t: dict, frame: int, limit: int = 64) -> list[tuple[str, str, int]]:
    """(file, function, line) from innermost out."""
    out = []
    while frame in t["StackFrames"] and len(out) < limit:
        m = re.search(r"file_location_id=(\d+) parent_frame_id=(\d+)", t["StackFrames"][frame])
        loc = re.search(r"file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", t["FileLocations"][int(m.group(1))])
        name = t["FileNames"][int(loc.group(1))].strip('"')
        out.append((name, t["FunctionNames"][int(loc.group(2))].strip('"'), int(loc.group(3))))
        parent = int(m.group(2))
        if parent == frame:
            break
        frame = parent
    return out


def source(t: dict, rest: str) -> str:
    """The innermost frame of an instruction outside JAX and the graph machinery: 'file:function:line'."""
    m = _FRAME.search(rest)
    if not m:
        return "(no source)"
    for name, function, line in frames(t, int(m.group(1))):
        if not any(s in name for s in _SKIP_FILES):
            return f"{name.rsplit('/', 1)[-1]}:{function.split('.<locals>')[0]}:{line}"
    return "(jax)"


def cycles(rest: str) -> int:
    m = _CYCLES.search(rest)
    return int(m.group(1)) if m else 0


def by_source(text: str, entry: list) -> collections.Counter:
    """{source line: estimated cycles} over the entry computation's instructions."""
    t, out = tables(text), collections.Counter()
    for _, _, op, rest in entry:
        c = cycles(rest)
        if c:
            out[source(t, rest) if op != "copy" else "(layout copy)"] += c
    return out
