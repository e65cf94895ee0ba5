"""Whether committed coverage files are in step with this checkout's kernels (needs torch: reads the
live dispatcher). coverage/aten.yaml records each overload's route to the device; a kernel added or
removed since changes it, and the verdicts built on the old route are stale (a `fallback` verdict
for an op that has a jax kernel now), as are the OpInfo cells of coverage/matrix.yaml that judged
it. (A route says nothing of a kernel's own CPU detours: matrix_exp's half-precision kernel routes
`native` and falls back inside, so a `fallback` cell is not stale because its op has a kernel.)
Each finding says what refreshes it."""

from __future__ import annotations

import dataclasses

from jaxdev.audit import aten_matrix, matrix


@dataclasses.dataclass(frozen=True)
class Stale:
    """An overload whose recorded route (or fallback) is not this checkout's, and the command that refreshes it."""

    name: str
    recorded: str
    now: str
    refresh: str

    def __str__(self) -> str:
        return f"{self.name}: recorded {self.recorded}, now {self.now} (refresh: {self.refresh})"


def stale_routes(aten_path: str) -> list[Stale]:
    """The overloads of an aten matrix whose recorded route differs from the dispatcher's now."""
    from jaxdev.audit import dispatch

    out = []
    for name, node in sorted(aten_matrix.load(aten_path).overloads.items()):
        if node.route is None:
            continue
        st = dispatch.status(name)
        if tuple(node.route) != (st.device, st.autograd):
            opinfos = " ".join(node.judged_by or node.opinfos or [])
            first = f"jaxdev coverage {opinfos} && " if node.evidence == "opinfo" and opinfos else ""
            refresh = f"{first}jaxdev coverage --aten {name}"
            out.append(Stale(name, "/".join(node.route), f"{st.device}/{st.autograd}", refresh))
    return out


def stale_verdicts(aten_path: str, matrix_path: str) -> list[Stale]:
    """The overloads an aten matrix judged from OpInfo cells (evidence `opinfo`) whose verdict the
    cells of the matrix at `matrix_path` no longer give: the matrix was re-run and the aten matrix
    not re-aggregated (aten_matrix's rule, recomputed here; pure, no torch)."""
    m = matrix.load(matrix_path)
    out = []
    for name, node in sorted(aten_matrix.load(aten_path).overloads.items()):
        if node.evidence != "opinfo":
            continue
        judges = [op for op in node.judged_by or node.opinfos or [] if op in m.ops]
        _, deciding = aten_matrix.aggregate(name, m.ops, judges)
        verdict, category = aten_matrix.verdict_of(deciding.status) if deciding else ("no measured cell", None)
        if (verdict, category or "") != (node.verdict, node.category):
            was = node.verdict + (f" ({node.category})" if node.category else "")
            now = verdict + (f" ({category})" if category else "")
            out.append(Stale(name, was, f"{now} by the cells of {matrix_path}", f"jaxdev coverage --aten {name}"))
    return out
