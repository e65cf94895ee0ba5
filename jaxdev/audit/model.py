"""The auditor's records as types, each as its YAML reads (no torch, no jax: the commands that answer
from the committed files import it).

- `Cell`: one (OpInfo, dtype, direction) cell of a coverage matrix; `OpNode`: an OpInfo's cells and
  the aten overloads its samples reached.
- `Verdict`: what one run of an op came to: a sample of a cell (check.run_sample) or a direct trial
  of an aten overload (schema_samples.trial); a cell is made of its samples' verdicts.
- `AtenNode`: one overload of coverage/aten.yaml, with its `Route` to the device.
- `Platform`: the JAX platform and device kind a matrix was measured on.
- `Peer`: the other PyTorch-on-JAX backend a matrix measured instead of jaxdev (jaxdev/audit/peers).

Round trip: `from_yaml` then `to_yaml` gives the mapping that was read, so a committed file loads
and dumps to the same bytes. A field that says nothing (an empty list, False, 0, None) is left out,
as the sweep writes it; a cell's status, reason, samples and counts are always written (a hand-made
entry without them gains them). Fields this jaxdev does not know (a newer file's) are kept as read.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jaxdev.math_settings as math_settings  # `from jaxdev import` would run the light CLI's deferred device


def _known(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")


def _split(cls, data: dict) -> tuple[dict, dict]:
    """(the fields `cls` knows, the others) of a YAML mapping."""
    known = _known(cls)
    return {k: v for k, v in data.items() if k in known}, {k: v for k, v in data.items() if k not in known}


def _sorted(mapping: dict) -> dict:
    """Keys in the order the files hold them (matrix.write_yaml sorts them)."""
    return dict(sorted(mapping.items()))


def _said(value) -> bool:
    """Whether an optional field says something (is written): a float always, a count when not 0, a
    flag when set, a text or list when not empty; None never."""
    if value is None or value is False:
        return False
    return True if isinstance(value, float) else bool(value)


@dataclasses.dataclass
class Cell:
    """A matrix cell: the worst status of its samples, the first reason of that status, how many
    samples ran and their statuses; where known, the ops that ran on CPU (`fallback`), the deciding
    sample (`repro`), the largest errors, whether the op is random (values unchecked), whether the
    OpInfo had more samples than were run (`limited`), how many samples passed by float64
    arbitration and how many CPU gave two results for (`unstable`: identical calls that differ)."""

    status: str
    reason: str = ""
    samples: int = 0
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    fallback: list[str] = dataclasses.field(default_factory=list)
    repro: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    random: bool = False
    limited: bool = False
    arbitrated: int = 0
    unstable: int = 0
    extra: dict = dataclasses.field(default_factory=dict)  # fields this jaxdev does not know, as read

    ALWAYS = ("status", "reason", "samples", "counts")

    @classmethod
    def from_yaml(cls, data: dict) -> Cell:
        known, extra = _split(cls, data)
        return cls(**known, extra=extra)

    def to_yaml(self) -> dict:
        out = {k: getattr(self, k) for k in self.ALWAYS}
        out["counts"] = dict(self.counts)
        for k in _known(type(self)):
            value = getattr(self, k)
            if k not in self.ALWAYS and _said(value):
                out[k] = list(value) if isinstance(value, list) else value
        return _sorted({**out, **self.extra})


@dataclasses.dataclass
class OpNode:
    """An OpInfo in a matrix: the aten overloads its samples reached (CPU trace, over all its cells)
    and its cells, dtype -> direction -> Cell."""

    aten: list[str] = dataclasses.field(default_factory=list)
    results: dict[str, dict[str, Cell]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_yaml(cls, data: dict) -> OpNode:
        results = {
            dtype: {direction: Cell.from_yaml(entry) for direction, entry in (dirs or {}).items()}
            for dtype, dirs in (data.get("results") or {}).items()
        }
        return cls(list(data.get("aten") or ()), results)

    def to_yaml(self) -> dict:
        results = {dtype: {d: cell.to_yaml() for d, cell in dirs.items()} for dtype, dirs in self.results.items()}
        return {"aten": list(self.aten), "results": results}


@dataclasses.dataclass
class Verdict:
    """One sample's or direct trial's outcome: a status (facts.STATUSES; a trial also `untriable`)
    and its reason, the repro, the overloads CPU's run reached (`aten`), the ops that ran on CPU
    (`fallback`), the errors of a `wrong` result, and what was not or otherwise compared: `random`
    and `uninitialised` (values unchecked), `arbitrated` (passed by float64 arbitration), `unstable`
    (CPU gave two results for identical calls). A trial adds the dtype of its inputs, the
    `category` of an untriable one, and the `donor` overload its arguments came from."""

    status: str
    reason: str = ""
    repro: str = ""
    aten: list[str] = dataclasses.field(default_factory=list)
    fallback: list[str] = dataclasses.field(default_factory=list)
    max_abs: float | None = None
    max_rel: float | None = None
    random: bool = False
    uninitialised: bool = False
    arbitrated: bool = False
    unstable: bool = False
    category: str = ""
    dtype: str = ""
    donor: str = ""

    def but(self, **changes) -> Verdict:
        """A copy with these fields changed."""
        return dataclasses.replace(self, **changes)


class Route(NamedTuple):
    """How an overload reaches the device: its PrivateUse1 and AutogradPrivateUse1 statuses
    (facts.DEVICE_STATUSES, facts.AUTOGRAD_STATUSES), as `jaxdev ops` gives them."""

    device: str = "missing"
    autograd: str = "missing"

    @classmethod
    def from_yaml(cls, data: dict | None) -> Route:
        data = data or {}
        return cls(data.get("PrivateUse1", "missing"), data.get("AutogradPrivateUse1", "missing"))

    def to_yaml(self) -> dict:
        return {"AutogradPrivateUse1": self.autograd, "PrivateUse1": self.device}


@dataclasses.dataclass
class AtenNode:
    """An overload of coverage/aten.yaml (aten_matrix's docstring has the rule): its verdict, what
    decided it (`evidence`: opinfo, direct or none; `category`: the worst status of a failing one,
    why an untriable one is), the reason and repro, and its statuses dtype -> direction -> status.
    `route` and `opinfos` (every OpInfo reaching it) are None when not recorded; `judged_by`
    names the OpInfos its cells come from when not all of `opinfos`."""

    verdict: str
    evidence: str
    reason: str = ""
    category: str = ""
    repro: str = ""
    cells: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    route: Route | None = None
    opinfos: list[str] | None = None
    judged_by: list[str] | None = None
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_yaml(cls, data: dict) -> AtenNode:
        known, extra = _split(cls, data)
        known.setdefault("verdict", "")
        known.setdefault("evidence", "")
        if "route" in known:
            known["route"] = Route.from_yaml(known["route"])
        return cls(**known, extra=extra)

    def to_yaml(self) -> dict:
        out: dict = {"verdict": self.verdict, "evidence": self.evidence, "reason": self.reason}
        out["cells"] = {dtype: dict(dirs) for dtype, dirs in self.cells.items()}
        if self.route is not None:
            out["route"] = self.route.to_yaml()
        for k in ("opinfos", "judged_by"):
            if getattr(self, k) is not None:
                out[k] = list(getattr(self, k))
        for k in ("category", "repro"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        return _sorted({**out, **self.extra})


def _present(obj, names) -> dict:
    """The fields of `obj` that are not None, for YAML (None: absent from the file)."""
    return {k: getattr(obj, k) for k in names if getattr(obj, k) is not None}


@dataclasses.dataclass
class ThisRun:
    """What the last run into a matrix did, when the file's `run` describes another (a scoped run
    merged, a resume, --merge): its units, samples, wall time, and scope, shard or merged files."""

    units: int | None = None
    samples: int | None = None
    wall_s: float | None = None
    scope: dict | None = None
    shard: str | None = None
    merged: int | None = None
    cells: int | None = None
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_yaml(cls, data: dict) -> ThisRun:
        known, extra = _split(cls, data or {})
        return cls(**known, extra=extra)

    def to_yaml(self) -> dict:
        return _sorted({**_present(self, _known(type(self))), **self.extra})


@dataclasses.dataclass
class RunFacts:
    """A matrix's `run`: whether the sweep that made it completed, its --max-samples and --timeout,
    its wall time and samples (the file's, over every run into it), its --shard and scope (OPS,
    --dtype), the inputs its cells drew from (absent: sample inputs), how many files a --merge
    joined, and the last run into it (`this_run`). A field None is absent from the file."""

    complete: bool | None = None
    max_samples: int | None = None
    timeout_s: float | None = None
    wall_s: float | None = None
    samples: int | None = None
    shard: str | None = None
    scope: dict | None = None
    inputs: str | None = None
    merged: int | None = None
    this_run: ThisRun | None = None
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_yaml(cls, data: dict | None) -> RunFacts:
        known, extra = _split(cls, data or {})
        if known.get("this_run") is not None:
            known["this_run"] = ThisRun.from_yaml(known["this_run"])
        return cls(**known, extra=extra)

    def to_yaml(self) -> dict:
        out = _present(self, _known(type(self)))
        if self.this_run is not None:
            out["this_run"] = self.this_run.to_yaml()
        return _sorted({**out, **self.extra})


@dataclasses.dataclass(frozen=True, order=True)
class Platform:
    """The JAX platform a matrix was measured on (jax.devices()[0].platform: cpu, tpu, gpu), its
    device kind (.device_kind: "cpu", "TPU v5 lite") and the JAXDEV_MATH setting its kernels ran under
    (auto, near, fast or own; empty: the platform's default, math_settings.default_for). Cells
    of one platform under two settings are two platforms: their files never mix (platforms.folder)."""

    name: str
    device_kind: str
    math: str = ""

    def __post_init__(self):
        if not self.math:
            object.__setattr__(self, "math", math_settings.default_for(self.name))

    @property
    def default_math(self) -> bool:
        """Whether its setting is the one JAXDEV_MATH unset gives on this platform."""
        return self.math == math_settings.default_for(self.name)

    @property
    def label(self) -> str:
        """How reports name it: the device kind, or the platform when that says no more ("cpu"), and the
        setting when it is not the platform's default ("TPU v5 lite [JAXDEV_MATH=auto]")."""
        kind = self.name if self.device_kind.lower() == self.name.lower() else self.device_kind
        return kind if self.default_math else f"{kind} [JAXDEV_MATH={self.math}]"

    @classmethod
    def from_yaml(cls, data: dict | None) -> Platform | None:
        """A file's `platform` section; one without `math` was measured under auto (the only setting
        before accelerators defaulted to near)."""
        if not isinstance(data, dict) or not data.get("name"):
            return None
        return cls(str(data["name"]), str(data.get("device_kind") or data["name"]), str(data.get("math") or "auto"))

    def to_yaml(self) -> dict:
        out = {"device_kind": self.device_kind, "name": self.name}
        if self.math != "auto":  # absent means auto (from_yaml): CPU's files stay as they were
            out["math"] = self.math
        return out


# What a matrix without a `platform` field was measured on: every one before platforms were recorded.
CPU = Platform("cpu", "cpu")


class Peer(NamedTuple):
    """The backend a peer matrix measured instead of jaxdev (coverage/peers/NAME/matrix.yaml): its
    name and version as its workers imported it, and how a sample ran through it (`how`, one line
    per direction and setting: jaxdev/audit/peers). Two records are the same peer when name and
    version agree; `how` is what the file says, not what makes it."""

    name: str
    version: str
    how: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """How reports name it: "torchax 0.0.13"."""
        return f"{self.name} {self.version}"

    def same(self, other: Peer | None) -> bool:
        return other is not None and (self.name, self.version) == (other.name, other.version)

    @classmethod
    def from_yaml(cls, data: dict | None) -> Peer | None:
        if not isinstance(data, dict) or not data.get("name"):
            return None
        return cls(str(data["name"]), str(data.get("version") or "?"), tuple(data.get("how") or ()))

    def to_yaml(self) -> dict:
        out = {"name": self.name, "version": self.version}
        return {**out, "how": list(self.how)} if self.how else out
