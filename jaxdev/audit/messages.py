"""What the auditor's parent and its worker processes say to each other (runner.py's pipes), one
named type per message.

The pool's own (runner.py): a worker says `Ready` (with the platform its JAX runs on) once started,
then per task any progress messages and finally `Done`; the parent hands it a task's request, or
`Stop`. The requests and progress messages of each kind of task:

- an OpInfo unit (unit_work.py): `UnitRequest`; per sample `Started` (before it runs, with its
  repro, so a crash or a hang is charged to it) then `Judged`, after `Count` (the samples offered);
  `Done` carries the reason the OpInfo's sample generator failed, or "".
- a direct trial (schema_samples/work.py): `TrialRequest`; `Phase` (cpu: finding a candidate CPU
  accepts; jax: running it) tells a CPU kernel's crash from jax's; `Done` carries the Verdict.
"""

from __future__ import annotations

import dataclasses

from jaxdev.audit.model import Platform, Verdict


@dataclasses.dataclass(frozen=True)
class Ready:
    platform: Platform


@dataclasses.dataclass(frozen=True)
class Stop:
    pass


@dataclasses.dataclass(frozen=True)
class Done:
    payload: object


@dataclasses.dataclass(frozen=True)
class UnitRequest:
    unit: object  # samples.Unit
    start: int  # the first sample to run (a resumed unit skips those already judged)
    limit: int  # --max-samples
    inputs: str  # facts.INPUTS: sample or reference inputs


@dataclasses.dataclass(frozen=True)
class Count:
    total: int  # samples the OpInfo offers (for sample inputs at most limit + 1: enough to tell "limited")


@dataclasses.dataclass(frozen=True)
class Started:
    index: int
    repro: str


@dataclasses.dataclass(frozen=True)
class Judged:
    index: int
    verdict: Verdict


@dataclasses.dataclass(frozen=True)
class TrialRequest:
    name: str  # the aten overload
    donors: tuple  # [(sibling overload, OpInfo reaching it)]: arguments to try first


@dataclasses.dataclass(frozen=True)
class Phase:
    phase: str  # cpu | jax
