"""Forward results compared after the sample's output_process_fn_grad, as PyTorch's
test_compare_cpu does: eigenvector signs may differ, eigenvalues may not."""

from __future__ import annotations

import torch
from torch.testing._internal.opinfo.core import SampleInput

from jaxdev.audit.check import _gauge_free


def _eigh_sample():
    # what linalg.eigh's OpInfo compares: eigenvalues and |eigenvectors|
    return SampleInput(torch.eye(2), output_process_fn_grad=lambda out: (out[0], abs(out[1])))


def test_flipped_eigenvectors_are_equal_up_to_gauge():
    a = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
    values, vectors = torch.linalg.eigh(a)
    assert _gauge_free(_eigh_sample(), (values, -vectors), (values, vectors), 1e-5, 1.3e-6)


def test_wrong_eigenvalues_are_not_a_gauge():
    a = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
    values, vectors = torch.linalg.eigh(a)
    assert not _gauge_free(_eigh_sample(), (values + 1e-3, vectors), (values, vectors), 1e-5, 1.3e-6)


def test_identity_processing_decides_nothing():
    sample = SampleInput(torch.ones(2))
    assert not _gauge_free(sample, torch.ones(2), -torch.ones(2), 1e-5, 1.3e-6)
