"""Argument builders of single families (einsum, set_, the Sobol engine, jagged tensors, ...) as a
table: base name -> builder (facts/arguments: the table that picks them). Imports torch: only
the trials import it."""

from __future__ import annotations

from collections.abc import Callable

import torch

from jaxdev.audit.facts.arguments.values import ByType, Ctx, OnCpu, StorageOf


def _sobol_state():
    import torch

    state = torch.zeros(2, 30, dtype=torch.int64)
    torch._sobol_engine_initialize_state_(state, 2)
    return state


# base name -> builder, for single overload families whose schema alone does not say how to call them
MISC: dict[str, Callable[[Ctx], dict]] = {
    "einsum": lambda c: {"equation": "ij,jk->ik", "tensors": [c.randn(3, 4), c.randn(4, 2)]},
    "tensordot": lambda c: {"self": c.randn(3, 4), "other": c.randn(4, 2), "dims_self": [1], "dims_other": [0]},
    "movedim": lambda c: {"self": c.randn(2, 3, 4), "source": [0, 1], "destination": [2, 0]},
    "moveaxis": lambda c: {"self": c.randn(2, 3, 4), "source": [0, 1], "destination": [2, 0]},
    "view_as_complex_copy": lambda c: {"self": c.randn(3, 2)},
    "_reshape_from_tensor": lambda c: {"self": c.randn(3, 4), "shape": OnCpu(torch.tensor([2, 6]))},
    "histogramdd": lambda c: {
        "self": c.randn(6, 2),
        "bins": [
            torch.tensor([-3.0, 0.0, 3.0], dtype=c.dtype),
            torch.tensor([-2.0, -1.0, 1.0, 2.0], dtype=c.dtype),
        ],
    },
    "_histogramdd_bin_edges": lambda c: {"self": c.randn(6, 2), "bins": [2, 3]},
    "_compute_linear_combination": lambda c: {"input": c.randn(3, 4), "coefficients": c.randn(2, 3)},
    "_cummax_helper": lambda c: {
        "self": c.randn(3, 4),
        "values": c.randn(3, 4),
        "indices": torch.zeros(3, 4, dtype=torch.int64),
        "dim": 1,
    },
    "_cummin_helper": lambda c: {
        "self": c.randn(3, 4),
        "values": c.randn(3, 4),
        "indices": torch.zeros(3, 4, dtype=torch.int64),
        "dim": 1,
    },
    "rrelu_with_noise": lambda c: {"self": c.randn(3, 4), "noise": c.randn(3, 4), "training": False},
    "set": lambda c: {
        "self": c.randn(2),
        "source": (lambda t: ByType({"Tensor": t, "Storage": StorageOf(t)}))(c.randn(12)),
        "storage_offset": 1,
        "size": [2, 3],
        "stride": [3, 1],
    },
    "_cast_Byte": lambda c: {"self": c.rand(3, 4, low=0.0, high=200.0)},  # C++ leaves negative -> uint8 undefined
    "_remove_batch_dim": lambda c: {"self": c.randn(3, 4), "level": 1, "batch_size": 3, "out_dim": 0},
    "_int_mm": lambda c: {
        "self": c.randint(-8, 8, 4, 8, dtype=torch.int8),
        "mat2": c.randint(-8, 8, 8, 4, dtype=torch.int8),
    },
    "_weight_int8pack_mm": lambda c: {
        "self": c.randn(4, 8, dtype=torch.float32),
        "mat2": c.randint(-8, 8, 4, 8, dtype=torch.int8),
        "scales": c.rand(4, low=0.5, high=1.5, dtype=torch.float32),
    },
    # SobolEngine's state: (dimension, MAXBIT=30) int64, filled by _sobol_engine_initialize_state_
    "_sobol_engine_initialize_state": lambda c: {"self": torch.zeros(2, 30, dtype=torch.int64), "dimension": 2},
    "_sobol_engine_scramble": lambda c: {
        "self": _sobol_state(),
        "ltm": torch.tril(c.randint(0, 2, 2, 30, 30)),
        "dimension": 2,
    },
    "_sobol_engine_draw": lambda c: {
        "quasi": torch.zeros(2, dtype=torch.int64),
        "n": 3,
        "sobolstate": _sobol_state(),
        "dimension": 2,
        "num_generated": 0,
        "dtype": torch.float32,
    },
    "_sobol_engine_ff": lambda c: {
        "self": torch.zeros(2, dtype=torch.int64),
        "n": 3,
        "sobolstate": _sobol_state(),
        "dimension": 2,
        "num_generated": 0,
    },
    "_test_check_tensor": lambda c: {"self": c.randint(0, 2, 3).bool()},
    "fractional_max_pool2d": lambda c: {
        "self": c.randn(1, 2, 5, 5),
        "kernel_size": [2, 2],
        "output_size": [2, 2],
        "random_samples": c.rand(1, 2, 2),
    },
    "fractional_max_pool3d": lambda c: {
        "self": c.randn(1, 2, 5, 5, 5),
        "kernel_size": [2, 2, 2],
        "output_size": [2, 2, 2],
        "random_samples": c.rand(1, 2, 3),
    },
    # jagged (nested-like) values of 2 rows of lengths 2 and 3, padded to 3
    "_jagged_to_padded_dense_forward": lambda c: {
        "values": c.randn(5, 3),
        "offsets": [torch.tensor([0, 2, 5])],
        "max_lengths": [3],
        "padding_value": 0.0,
    },
    "_padded_dense_to_jagged_forward": lambda c: {
        "dense": c.randn(2, 3, 3),
        "offsets": [torch.tensor([0, 2, 5])],
        "total_L": 5,
    },
    # weight norm over dim 0: g and the norms have v's shape with the other dims 1
    "_weight_norm_interface": lambda c: {"v": c.randn(3, 4), "g": c.randn(3, 1), "dim": 0},
    "_weight_norm_interface_backward": lambda c: (
        lambda v, g: {
            "grad_w": c.randn(3, 4),
            "saved_v": v,
            "saved_g": g,
            "saved_norms": v.norm(dim=1, keepdim=True),
            "dim": 0,
        }
    )(c.randn(3, 4), c.randn(3, 1)),
    "split_copy": lambda c: {"self": c.randn(5, 2), "split_size": 2, "dim": 0},
    "complex": lambda c: {"real": c.randn(3, 3), "imag": c.randn(3, 3)},
    "polar": lambda c: {"abs": c.rand(3, 3), "angle": c.randn(3, 3)},
}
