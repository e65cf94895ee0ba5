"""jaxdev/ops/put_take.py: put's alert under deterministic algorithms as CPU's."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import CPU, JAX


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_put_alerts_under_deterministic_algorithms_as_cpu(accumulate, in_place):
    """Without accumulate, duplicate positions write in any order: CPU's put_ raises under
    torch.use_deterministic_algorithms(True) (PyTorch's test_nondeterministic_alert_put)."""
    outcomes = []
    for device in (CPU, JAX):
        a = torch.zeros(4, device=device)
        i, v = torch.tensor([0, 0], device=device), torch.tensor([1.0, 2.0], device=device)
        torch.use_deterministic_algorithms(True)
        try:
            (a.put_ if in_place else a.put)(i, v, accumulate=accumulate)
            outcomes.append("ran")
        except RuntimeError as e:
            outcomes.append(str(e))
        finally:
            torch.use_deterministic_algorithms(False)
    assert outcomes[0] == outcomes[1]
