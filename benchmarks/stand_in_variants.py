"""The variant loop the stand-in benchmarks share (tpu_cold_step.py, tpu_compile_cost.py): each variant a
child process of the benchmark's own script, made a stand-in for a TPU (jaxdev/audit/deviceless.py), its
result one `RESULT <json>` line; rounds alternate the variants, so a busy machine slows all alike."""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def arguments(doc: str, variants: str) -> argparse.ArgumentParser:
    """The options both benchmarks take: the LM's size, batch and dtype, rounds, the variants (default
    `variants`), and the child's mode (set by the parent)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--size", default="full", choices=["full", "quick"])
    parser.add_argument("--batch", type=int, default=0, help="the batch (default: the size's, 16 at full)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default=variants)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def run_child(name: str, command: list, env: dict) -> dict:
    """The RESULT of `command` run as a stand-in with `env` added to this process's environment."""
    from jaxdev.audit import deviceless

    child_env = deviceless.environment(dict(os.environ, **env))
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, child_env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(command, env=child_env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise SystemExit(f"{name} failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-3:]}")


def rounds(chosen: str, known, count: int, run, line) -> dict:
    """{variant: [result of each round]} for the comma-separated `chosen` variants (each one of `known`),
    `run(name)` a round's result, `line(name, result)` what is printed of it as it comes."""
    names = chosen.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(known)}")
    results = collections.defaultdict(list)
    for r in range(count):
        for name in names:
            results[name].append(run(name))
            print(f"round {r + 1} {line(name, results[name][-1])}", flush=True)
    return {name: results[name] for name in names}
