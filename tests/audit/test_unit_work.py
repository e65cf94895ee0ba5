"""unit_work.py: a worker serves a unit from the inputs its task names."""

from __future__ import annotations

from jaxdev.audit import samples, unit_work
from jaxdev.audit.facts import SweepOptions
from jaxdev.audit.messages import Count, Done, Judged, UnitRequest
from jaxdev.audit.samples import Unit


class _Send:
    def __init__(self):
        self.messages = []

    def send(self, msg):
        self.messages.append(msg)


def test_a_reference_unit_is_served_its_spread_reference_inputs():
    unit = Unit("sin", "float32", "forward")
    task = unit_work.UnitTask(unit, 2, inputs=SweepOptions(inputs="reference").inputs)
    assert task.request() == UnitRequest(unit, 0, 2, "reference")
    sent = _Send()
    unit_work.serve(task.request(), sent)
    _, total = samples.drawn(unit, 2, "reference")
    assert sent.messages[0] == Count(total) and sent.messages[-1] == Done("")
    verdicts = [m for m in sent.messages if isinstance(m, Judged)]
    assert [m.index for m in verdicts] == [0, 1] and all(m.verdict.status == "pass" for m in verdicts)
    for m in sent.messages[:-1]:
        task.progress(m)
    entry = task.cell()
    assert entry.samples == 2 and entry.limited and entry.status == "pass"
