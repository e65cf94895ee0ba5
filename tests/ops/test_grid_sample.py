"""jaxdev/ops/grid_sample.py: grid_sample (bicubic bit for bit, half precision) and its checks, against CPU."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from half_programs import program_hazards
from jaxdev_testing import JAX, assert_same, on_both, seeded_randn

from jaxdev.ops import grid_sample

# --- grid_sample's bicubic mode bit for bit against CPU. test_ops' compare_cpu found jaxdev off by up to
# 2.7e-3 on OpInfo's reference input (a 345x456 image of 0..255 under a rotation): jaxdev unnormalized
# as CPU's scalar kernel does, ((g + 1) * size - 1) / 2, where the vectorized kernel CPU runs computes
# (g + 1) * (size / 2) - 0.5, and an ulp in the coordinate moves the result by up to 255 * ulp through
# the image's 255 -> 0 steps; and it rounded the multiply-adds as XLA fuses them, not as GCC fused them
# in CPU's kernel.


COMBINATIONS = [(p, a) for p in ("zeros", "border", "reflection") for a in (False, True)]


@pytest.mark.parametrize(("padding", "align"), [("zeros", False), ("reflection", True)])
def test_opinfo_reference_input(padding, align):
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.name == "nn.functional.grid_sample")
    sample = next(s for s in op.reference_inputs("cpu", torch.float32) if s.args[1:] == ("bicubic", padding, align))
    image, grid = sample.input, sample.args[0]
    assert_same(
        F.grid_sample(image.to(JAX), grid.to(JAX), "bicubic", padding, align),
        F.grid_sample(image, grid, "bicubic", padding, align),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("padding", "align"), COMBINATIONS)
def test_random(padding, align, dtype):
    """Coordinates beyond the image (every padding's taps), a NaN, and (float32) far-off ones; the halves
    round each step to their dtype as CPU's Vectorized<Half> does. (CPU converts a half's tap to int16:
    a tap past 32767 wraps onto some pixel there, which jaxdev does not reproduce.)"""
    g = torch.Generator().manual_seed(0)
    image = (torch.randn(2, 3, 9, 11, generator=g) * 10).to(dtype)
    grid = torch.rand(2, 13, 12, 2, generator=g) * 2.6 - 1.3
    grid[0, 0, 0, 0], grid[0, 0, 1] = float("nan"), torch.tensor([1e7, -1e7] if dtype == torch.float32 else [9.0, -9.0])
    grid = grid.to(dtype)
    assert_same(
        F.grid_sample(image.to(JAX), grid.to(JAX), "bicubic", padding, align),
        F.grid_sample(image, grid, "bicubic", padding, align),
    )


@pytest.mark.parametrize("padding", ["zeros", "reflection"])
def test_gradients(padding):
    g = torch.Generator().manual_seed(1)
    image, grid = torch.randn(2, 3, 7, 9, generator=g), torch.rand(2, 5, 6, 2, generator=g) * 2.4 - 1.2
    results = []
    for device in ("cpu", JAX):
        x, z = image.to(device).detach().requires_grad_(), grid.to(device).detach().requires_grad_()
        F.grid_sample(x, z, "bicubic", padding, False).square().sum().backward()
        results.append((x.grad, z.grad))
    assert_same(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    assert_same(results[1][1], results[0][1], rtol=1e-5, atol=1e-4)


@pytest.mark.tpu_fact("a TPU's division is not IEEE's: reflection padding reduces by the own fmod there")
@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (2, 3, 4, 5, 6)])
@pytest.mark.parametrize("align", [False, True])
def test_reflection_gradients_where_fmod_is_the_own(tpu_policy, shape, align):
    """The own fmod (division.fmod where the quotient is not IEEE's) reduces in a while_loop, which JAX
    cannot reverse-differentiate: bilinear reflection padding's backward (jax.vjp of the forward) raised
    its ValueError on the TPU stand-in (test_ops_library's grid_sample cases); it takes lax.rem's derivative."""
    g = torch.Generator().manual_seed(1)
    image = torch.randn(*shape, generator=g)
    grid = torch.rand(shape[0], *shape[2:-1], 4, len(shape) - 2, generator=g) * 2.6 - 1.3
    results = []
    for device in ("cpu", JAX):
        x, z = image.to(device).detach().requires_grad_(), grid.to(device).detach().requires_grad_()
        F.grid_sample(x, z, "bilinear", "reflection", align).square().sum().backward()
        results.append((x.grad, z.grad))
    assert_same(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    assert_same(results[1][1], results[0][1], rtol=1e-5, atol=1e-4)


HALF = [torch.bfloat16, torch.float16]


# --- grid_sampler_2d in half: CPU's vectorized kernel rounds every Vectorized<half> step ---


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mode", [0, 1])  # bilinear, nearest
@pytest.mark.parametrize("padding", [0, 1, 2])  # zeros, border, reflection
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_2d_half(dtype, mode, padding, align_corners):
    inp = seeded_randn(2, 3, 5, 20, dtype=dtype)
    grid = (torch.rand(2, 13, 10, 2, generator=torch.Generator().manual_seed(1)) * 3 - 1.5).to(dtype)
    grid[0, 0, 0, 0] = float("nan")
    on_both(lambda d: torch.grid_sampler_2d(inp.to(d), grid.to(d), mode, padding, align_corners))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding", [0, 1])  # (reflection in 3-D half stays the float path)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_3d_half(dtype, mode, padding, align_corners):
    inp = seeded_randn(2, 3, 5, 6, 7, dtype=dtype)
    grid = (torch.rand(2, 4, 3, 5, 3, generator=torch.Generator().manual_seed(1)) * 3 - 1.5).to(dtype)
    on_both(lambda d: torch.grid_sampler_3d(inp.to(d), grid.to(d), mode, padding, align_corners))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
@pytest.mark.parametrize(("nd", "mode"), [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1)])
def test_half_sampler_programs_state_their_rounding(dtype, nd, mode):
    """Issue 41: each step rounds by reduce_precision, in float32 (bilinear/nearest) or float64
    (bicubic), and the result leaves float64 through float32: no half arithmetic for LLVM to fuse on
    a CPU with native float16 (the round trips the 2-D half kernel wrote made it round once where CPU
    rounds twice, and grid_sampler_2d half failed there)."""
    img, grid = jnp.ones((1, 2) + (4,) * nd, dtype), jnp.zeros((1,) + (3,) * nd + (nd,), dtype)
    for padding, align in itertools.product((0, 1, 2), (False, True)):
        assert program_hazards(grid_sample._sampler(mode, padding, align), img, grid) == []


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


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("op", ["grid_sampler_2d", "grid_sampler_3d", "grid_sampler"])
@pytest.mark.parametrize("shapes", SHAPES, ids=[f"{i}x{g}" for i, g in SHAPES])
def test_arguments_checked_as_cpu(op, shapes):
    for (mode, padding), grid_dtype in itertools.product(MODES, (torch.float64, torch.float32)):
        case = (op, *shapes, mode, padding, grid_dtype)
        assert _outcome(op, "jax", *shapes, mode, padding, grid_dtype) == _outcome(
            op, "cpu", *shapes, mode, padding, grid_dtype
        ), case


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("mode, padding", [(3, 0), (0, 3)])
def test_unknown_mode_is_refused_in_one_sentence(mode, padding):
    # CPU runs an out-of-range enum unchecked; jax refuses rather than invent a result
    x, g = torch.ones(1, 1, 2, 2, device="jax"), torch.zeros(1, 1, 1, 2, device="jax")
    with pytest.raises(RuntimeError, match=r"^grid_sampler\(\): unknown interpolation mode \d or padding mode \d$"):
        torch.grid_sampler_2d(x, g, mode, padding, False)
