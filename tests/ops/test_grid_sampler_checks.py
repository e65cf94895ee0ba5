"""grid_sampler_2d/3d reject malformed arguments with CPU's exception and message, in CPU's order
(check_grid_sampler_common, the 2-D/3-D check, then the kernel's bicubic and dtype checks). Found by
PyTorch's TestTorchDeviceType.test_invalid_shapes_grid_sampler: jax had one combined message of its own,
and an input with an empty spatial dimension returned a result where CPU raises."""

import itertools

import pytest
import torch

pytestmark = pytest.mark.usefixtures("no_fallback")

SHAPES = [
    ((2, 3, 4, 5), (2, 3, 3, 2)),  # valid 2-D
    ((2, 3, 4, 5), (1, 3, 3, 2)),  # batch sizes differ
    ((2, 3, 4, 5), (2, 3, 3, 3)),  # grid's last size wrong
    ((2, 3, 4, 5), (2, 3, 3, 2, 1)),
    ((2, 3, 0, 5), (2, 3, 3, 2)),  # empty spatial dimension
    ((2, 3, 4, 5, 6), (2, 3, 3, 3, 3)),  # valid 3-D
    ((2, 3, 4, 5, 6), (2, 3, 3, 3, 2)),
    ((2, 3, 4, 5, 6), (1, 3, 3, 3, 3)),
    ((2, 3, 4, 5), (2, 3, 3, 4)),
    ((2, 3, 4), (2, 3, 1)),  # 1-D spatial
    ((2, 3, 4, 0, 6), (2, 1, 1, 1, 3)),
    ((5, 5, 5, 5, 5), (1, 1, 1, 4, 4)),  # PyTorch's test_invalid_shapes_grid_sampler
    ((5, 5, 5, 5), (1, 1, 4, 4)),
    ((), (2, 1, 1, 2)),
    ((2, 3, 4, 5), ()),
]
MODES = [(0, 0), (1, 1), (2, 2), (2, 0)]  # (interpolation, padding): bilinear, nearest, bicubic


def _outcome(op, device, ishape, gshape, mode, padding, grid_dtype):
    x = torch.ones(ishape, dtype=torch.float64, device=device)
    g = torch.zeros(gshape, dtype=grid_dtype, device=device)
    try:
        r = getattr(torch, op)(x, g, mode, padding, False)
    except Exception as e:  # the exception is the result compared
        return type(e), str(e)
    return tuple(r.shape), r.dtype


@pytest.mark.parametrize("op", ["grid_sampler_2d", "grid_sampler_3d", "grid_sampler"])
@pytest.mark.parametrize("shapes", SHAPES, ids=[f"{i}x{g}" for i, g in SHAPES])
def test_arguments_checked_as_cpu(op, shapes):
    for (mode, padding), grid_dtype in itertools.product(MODES, (torch.float64, torch.float32)):
        case = (op, *shapes, mode, padding, grid_dtype)
        assert _outcome(op, "jax", *shapes, mode, padding, grid_dtype) == _outcome(
            op, "cpu", *shapes, mode, padding, grid_dtype
        ), case


@pytest.mark.parametrize("mode, padding", [(3, 0), (0, 3)])
def test_unknown_mode_is_refused_in_one_sentence(mode, padding):
    # CPU runs an out-of-range enum unchecked; jax refuses rather than invent a result
    x, g = torch.ones(1, 1, 2, 2, device="jax"), torch.zeros(1, 1, 1, 2, device="jax")
    with pytest.raises(RuntimeError, match=r"^grid_sampler\(\): unknown interpolation mode \d or padding mode \d$"):
        torch.grid_sampler_2d(x, g, mode, padding, False)
