"""Argument builders for the direct trials of op families whose schema alone does not say how to
call them (schema_samples): a fused optimiser takes lists of equal-shaped params, grads and
moments, a `*_backward` op takes a grad_output shaped like its forward's output, an RNN takes
weights consistent with one hidden size, a loss takes class indices as target, ...

`hint_for(base)` gives the builder of an overload's family (matched on the base name, without
`aten::` and the overload name), or None. A builder takes a `Ctx` (a seeded CPU generator and the
candidate's floating dtype) and returns CPU values by argument name; arguments it does not name are
built from the schema as usual, names the overload does not have are dropped, and a value whose
kind does not fit the overload's type (a list for a `str`, ...) is left to the schema builder, so
one builder serves a family's overloads (`conv_tbc`, `conv_tbc.out`; `_fused_adam` with a float or
a tensor `lr`). Values are moved to the trial's device except those wrapped in `OnCpu` (arguments
PyTorch requires on CPU, like a packed sequence's batch_sizes); `StorageOf(t)` stands for the
storage of `t` on the trial's device. Builders may run CPU ops to derive consistent arguments (a
forward to shape a backward's grad_output, lu_factor for lu_solve's LU and pivots). Nothing here
decides a verdict: the trial still runs the op on CPU and on jax with these values and compares.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class OnCpu:
    """An argument PyTorch requires on CPU whatever the op's device."""

    def __init__(self, value):
        self.value = value


class StorageOf:
    """The untyped storage of this tensor once moved to the trial's device."""

    def __init__(self, tensor):
        self.tensor = tensor


class ByType:
    """One value per schema type (`Tensor`, `List[int]`, `Storage`, ...) for an argument whose type
    differs between the overloads of a family (gradient's spacing: Scalar[] or Tensor[])."""

    def __init__(self, by_type: dict):
        self.by_type = by_type


class Ctx:
    """Random CPU values for one candidate: `gen` seeded per candidate, `dtype` its floating dtype."""

    def __init__(self, gen, dtype):
        self.gen = gen
        self.dtype = dtype

    def randn(self, *shape, dtype=None):
        import torch

        return torch.randn(shape, generator=self.gen, dtype=dtype or self.dtype)

    def rand(self, *shape, low: float = 0.0, high: float = 1.0, dtype=None):
        import torch

        return low + (high - low) * torch.rand(shape, generator=self.gen, dtype=dtype or self.dtype)

    def randint(self, low: int, high: int, *shape, dtype=None):
        import torch

        return torch.randint(low, high, shape, generator=self.gen, dtype=dtype or torch.int64)

    def spd(self, n: int):
        """A well-conditioned symmetric positive definite n x n matrix."""
        import torch

        a = self.randn(n, n)
        return a @ a.mT + n * torch.eye(n, dtype=self.dtype)

    def well_conditioned(self, n: int):
        import torch

        return self.randn(n, n) + n * torch.eye(n, dtype=self.dtype)


# ---------------------------------------------------------------------------------------------
# Convolutions: N=2, C_in=3, C_out=4, spatial 5, kernel 2 (groups 1)


def _spatial(base: str) -> int:
    m = re.search(r"([123])d", base)
    return int(m.group(1)) if m else 2


def _conv(c: Ctx, base: str) -> dict:
    n = _spatial(base)
    transposed = "transpose" in base
    x = c.randn(2, 3, *([5] * n))
    weight = c.randn(*((3, 4) if transposed else (4, 3)), *([2] * n))
    out_len = 6 if transposed else 4
    grad_output = c.randn(2, 4, *([out_len] * n))
    ones, zeros = [1] * n, [0] * n
    vals = {
        "input": x,
        "self": x,
        "weight": weight,
        "bias": c.randn(4),
        "kernel_size": [2] * n,
        "stride": ones,
        "padding": zeros,
        "dilation": ones,
        "output_padding": zeros,
        "groups": 1,
        "transposed": transposed,
        "benchmark": False,
        "deterministic": True,
        "cudnn_enabled": False,
        "allow_tf32": False,
        "grad_output": grad_output,
        "gO": grad_output,
        "ggI": c.randn(*x.shape),
        "ggW": c.randn(*weight.shape),
        "ggb": c.randn(4),
        "output_mask": [True, True, True],
    }
    if base == "conv_tbc":  # time, batch, channels; weight (k, C_in, C_out)
        vals.update(self=c.randn(5, 2, 3), weight=c.randn(2, 3, 4), bias=c.randn(4), pad=0)
    return vals


# ---------------------------------------------------------------------------------------------
# Upsampling: N=2, C=3, input 3 per spatial dim, output 6


def _upsample(c: Ctx, base: str) -> dict:
    n = _spatial(base)
    backward = base.endswith("_backward")
    vals = {
        "input": c.randn(2, 3, *([3] * n)),
        "output_size": [6] * n,
        "input_size": [2, 3, *([3] * n)],
        "align_corners": False,
        "scale_factors": None,
    }
    if backward:
        vals["grad_output"] = c.randn(2, 3, *([6] * n))
    return vals


# ---------------------------------------------------------------------------------------------
# Normalisation: input (2, 3, 4), 3 channels


def _batch_norm(c: Ctx, base: str) -> dict:
    mean, var = c.randn(3), c.rand(3, low=0.5, high=1.5)
    x = c.randn(2, 3, 4)
    return {
        "input": x,
        "weight": c.randn(3),
        "bias": c.randn(3),
        "running_mean": mean,
        "running_var": var,
        "training": False,
        "momentum": 0.1,
        "eps": 1e-5,
        "cudnn_enabled": False,
        # _batch_norm_impl_index_backward with impl_index 0 (the native kernel): its saved values
        "impl_index": 0,
        "grad_output": c.randn(2, 3, 4),
        "save_mean": x.mean((0, 2)),
        "save_var_transform": 1 / (x.var((0, 2), unbiased=False) + 1e-5).sqrt(),
        "train": True,
        "output_mask": [True, True, True],
        "reservedSpace": c.randn(0),
    }


def _norm_over_last(c: Ctx, base: str) -> dict:
    return {"input": c.randn(2, 3, 4), "normalized_shape": [4], "weight": c.randn(4), "bias": c.randn(4), "eps": 1e-5}


# ---------------------------------------------------------------------------------------------
# Recurrent networks: input size 4, hidden 3, seq 3, batch 2, one layer, one direction


_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1, "_thnn_fused_lstm_cell": 4, "_thnn_fused_gru_cell": 3}


def _rnn(c: Ctx, base: str) -> dict:
    import torch

    kind = base.removesuffix("_cell")
    gates = next(g for k, g in _GATES.items() if kind.startswith(k))
    hidden, inp = 3, 4
    params = [
        c.randn(gates * hidden, inp),
        c.randn(gates * hidden, hidden),
        c.randn(gates * hidden),
        c.randn(gates * hidden),
    ]
    if base.endswith("_cell"):  # one step: input (batch, input), hx (batch, hidden)
        hx = c.randn(2, hidden)
        return {
            "input": c.randn(2, inp),
            "hx": [hx, c.randn(2, hidden)] if kind == "lstm" else hx,
            "w_ih": params[0],
            "w_hh": params[1],
            "b_ih": params[2],
            "b_hh": params[3],
        }
    h0 = c.randn(1, 2, hidden)
    batch_sizes = torch.tensor([2, 2, 1])  # a packed sequence of lengths 3 and 2
    return {
        "input": c.randn(3, 2, inp),
        "data": c.randn(int(batch_sizes.sum()), inp),
        "batch_sizes": OnCpu(batch_sizes),
        "hx": [h0, c.randn(1, 2, hidden)] if kind == "lstm" else h0,
        "params": params,
        "has_biases": True,
        "num_layers": 1,
        "dropout": 0.0,
        "train": False,
        "bidirectional": False,
        "batch_first": False,
    }


def _packed(c: Ctx, base: str) -> dict:
    import torch

    batch_sizes = torch.tensor([2, 2, 1])
    return {
        "input": c.randn(3, 2, 4),
        "lengths": OnCpu(torch.tensor([3, 2])),
        "batch_first": False,
        "grad": c.randn(5, 4),
        "input_size": [3, 2, 4],
        "batch_sizes": OnCpu(batch_sizes),
        "data": c.randn(5, 4),
        "padding_value": 0.0,
        "total_length": 3,
    }


def _fused_lstm_cell_backward(c: Ctx, base: str) -> dict:
    import torch

    gates, cx = c.randn(2, 12), c.randn(2, 3)
    _, cy, workspace = torch.ops.aten._thnn_fused_lstm_cell(gates, c.randn(2, 12), cx)
    return {
        "grad_hy": c.randn(2, 3),
        "grad_cy": c.randn(2, 3),
        "cx": cx,
        "cy": cy,
        "workspace": workspace,
        "has_bias": True,
    }


# ---------------------------------------------------------------------------------------------
# Optimisers and scalers: two params of shape (3, 3)


def _fused_optimiser(c: Ctx, base: str) -> dict:
    import torch

    def two(make):
        return [make(), make()]

    return {
        "self": two(lambda: c.randn(3, 3)),
        "grads": two(lambda: c.randn(3, 3)),
        "exp_avgs": two(lambda: c.randn(3, 3)),
        "exp_avg_sqs": two(lambda: c.rand(3, 3)),
        "max_exp_avg_sqs": [],
        "state_sums": two(lambda: c.rand(3, 3)),
        "momentum_buffer_list": [],
        "state_steps": [torch.tensor(3.0), torch.tensor(3.0)],
        "lr": 0.01,
        "lr_decay": 0.0,
        "beta1": 0.9,
        "beta2": 0.999,
        "weight_decay": 0.01,
        "momentum": 0.0,
        "dampening": 0.0,
        "nesterov": False,
        "eps": 1e-8,
        "amsgrad": False,
        "maximize": False,
        "is_first_step": False,
    }


def _foreach_pointwise_tensor(c: Ctx, base: str) -> dict:
    return {
        "self": [c.randn(3, 3), c.randn(2)],
        "tensor1": [c.randn(3, 3), c.randn(2)],
        "tensor2": [c.rand(3, 3, low=0.5, high=1.5), c.rand(2, low=0.5, high=1.5)],
        "scalars": OnCpu(c.randn(2, dtype=__import__("torch").float64)),
    }


def _amp_update_scale(c: Ctx, base: str) -> dict:
    import torch

    return {
        "self": torch.tensor([2.0**16], dtype=torch.float32),
        "growth_tracker": torch.tensor([1], dtype=torch.int32),
        "found_inf": torch.tensor([0.0], dtype=torch.float32),
        "scale_growth_factor": 2.0,
        "scale_backoff_factor": 0.5,
        "growth_interval": 2,
    }


# ---------------------------------------------------------------------------------------------
# Losses: 4 samples of 3 classes


def _loss(c: Ctx, base: str) -> dict:
    import torch

    vals = {"self": torch.log_softmax(c.randn(4, 3), -1), "target": c.randint(0, 3, 4), "reduction": 1}
    if base == "nll_loss2d":
        vals.update(self=torch.log_softmax(c.randn(2, 3, 4, 4), 1), target=c.randint(0, 3, 2, 4, 4))
    elif base == "multilabel_margin_loss":
        target = c.randint(0, 3, 4, 3)
        target[:, 2] = -1  # each row: its labels up to the first -1
        vals.update(self=c.randn(4, 3), target=target)
    elif base == "cosine_embedding_loss":
        vals = {"input1": c.randn(4, 3), "input2": c.randn(4, 3), "target": torch.tensor([1.0, -1.0, 1.0, -1.0])}
    elif base == "ctc_loss":  # T=6, N=2, C=4 (blank 0), target lengths 3 and 2
        vals = {
            "log_probs": torch.log_softmax(c.randn(6, 2, 4), -1),
            "targets": c.randint(1, 4, 2, 3),
            "input_lengths": [6, 5],
            "target_lengths": [3, 2],
        }
    return vals


# ---------------------------------------------------------------------------------------------
# Embeddings: 5 rows of 3, indices in [0, 5), bags [0, 2) and [2, 4)


def _embedding(c: Ctx, base: str) -> dict:
    import torch

    weight, indices, offsets = c.randn(5, 3), c.randint(0, 5, 4), torch.tensor([0, 2])
    vals = {
        "weight": weight,
        "indices": indices,
        "offsets": offsets,
        "mode": 0,
        "grad": c.randn(4, 3),
        "num_weights": 5,
        "padding_idx": -1,
        "scale_grad_by_freq": False,
        "sparse": False,
        "per_sample_weights": None,
        "include_last_offset": False,
    }
    if base.endswith("_backward"):  # the saved values of a forward in mode sum with per-sample weights
        weights = c.rand(4, low=0.5, high=1.5)
        _, offset2bag, bag_size, maximum_indices = torch.ops.aten._embedding_bag(
            weight, indices, offsets, False, 0, False, weights
        )
        vals.update(
            grad=c.randn(2, 3),
            offset2bag=offset2bag,
            bag_size=bag_size,
            maximum_indices=maximum_indices,
            per_sample_weights=weights,
        )
    return vals


# ---------------------------------------------------------------------------------------------
# Linear algebra


def _linalg(c: Ctx, base: str) -> dict:
    import torch

    if base in ("linalg_cholesky", "linalg_cholesky_ex", "cholesky"):
        return {"self": c.spd(3), "A": c.spd(3)}
    if base == "lu_solve":
        lu, pivots = torch.linalg.lu_factor(c.well_conditioned(3))
        return {"self": c.randn(3, 2), "LU_data": lu, "LU_pivots": pivots}
    if base == "orgqr":
        a, tau = torch.geqrf(c.randn(4, 3))
        return {"self": a, "input2": tau}
    if base == "linalg_tensorinv":
        return {"self": c.randn(4, 2, 2) + torch.eye(4, dtype=c.dtype).reshape(4, 2, 2), "ind": 1}
    if base in ("linalg_cond", "linalg_norm"):
        return {"self": c.well_conditioned(3), "p": "fro", "ord": "fro"}
    if base == "nuclear_norm":
        return {"self": c.randn(3, 4), "dim": [0, 1]}
    return {}


# ---------------------------------------------------------------------------------------------
# Sampling grids, attention, signal processing, shape-consistent odds and ends


def _grid_sampler(c: Ctx, base: str) -> dict:
    return {
        "input": c.randn(1, 2, 4, 4),
        "grid": c.rand(1, 3, 3, 2, low=-1.0, high=1.0),
        "grad_output": c.randn(1, 2, 3, 3),
        "interpolation_mode": 0,
        "padding_mode": 0,
        "align_corners": False,
    }


def _affine_grid(c: Ctx, base: str) -> dict:
    return {"theta": c.randn(2, 2, 3), "grad": c.randn(2, 4, 4, 2), "size": [2, 1, 4, 4], "align_corners": False}


def _attention(c: Ctx, base: str) -> dict:
    e = 4
    x = c.randn(2, 3, e)
    return {
        "query": x,
        "key": x,
        "value": x,
        "src": x,
        "embed_dim": e,
        "num_head": 2,
        "num_heads": 2,
        "qkv_weight": c.randn(3 * e, e) / 2,
        "qkv_bias": c.randn(3 * e),
        "proj_weight": c.randn(e, e) / 2,
        "proj_bias": c.randn(e),
        "mask": None,
        "need_weights": False,
        "use_gelu": False,
        "norm_first": False,
        "eps": 1e-5,
        "norm_weight_1": c.randn(e),
        "norm_bias_1": c.randn(e),
        "norm_weight_2": c.randn(e),
        "norm_bias_2": c.randn(e),
        "ffn_weight_1": c.randn(2 * e, e) / 2,
        "ffn_bias_1": c.randn(2 * e),
        "ffn_weight_2": c.randn(e, 2 * e) / 2,
        "ffn_bias_2": c.randn(e),
    }


def _stft(c: Ctx, base: str) -> dict:
    import torch

    window = torch.hann_window(8, dtype=c.dtype)
    vals = {
        "self": c.randn(32),
        "n_fft": 8,
        "hop_length": 2,
        "win_length": 8,
        "window": window,
        "center": True,
        "pad_mode": "reflect",
        "normalized": False,
        "onesided": True,
        "return_complex": True,
    }
    if base == "istft":
        spectrum = torch.stft(c.randn(32), 8, 2, 8, window, return_complex=True)
        vals.update(self=spectrum, return_complex=False, length=32)
    return vals


def _glu_jvp(c: Ctx, base: str) -> dict:
    import torch

    x = c.randn(3, 4)
    return {
        "glu": torch.nn.functional.glu(x, 1),
        "x": x,
        "dx": c.randn(3, 4),
        "dim": 1,
        "grad_x": c.randn(3, 4),
        "grad_glu": c.randn(3, 2),
        "dgrad_glu": c.randn(3, 2),
    }


def _gradient(c: Ctx, base: str) -> dict:
    import torch

    coords = torch.cumsum(c.rand(3, low=0.5, high=1.5), 0)  # increasing coordinates along dim 0
    return {
        "self": c.randn(3, 4),
        "spacing": ByType({"List[number]": [2.0], "List[Tensor]": [coords]}),
        "dim": ByType({"List[int]": [0], "Optional[int]": 0}),
        "edge_order": 1,
    }


def _backward_of_reduction(c: Ctx, base: str) -> dict:
    import torch

    if base == "index_select_backward":
        return {"grad": c.randn(2, 3), "self_sizes": [3, 3], "dim": 0, "index": torch.tensor([0, 2])}
    if base == "value_selecting_reduction_backward":
        return {"grad": c.randn(3), "dim": 0, "indices": c.randint(0, 3, 3), "sizes": [3, 3], "keepdim": False}
    if base == "trace_backward":
        return {"grad": c.randn(), "sizes": [3, 4]}
    if base == "embedding_backward":
        return {"grad": c.randn(4, 3), "indices": c.randint(0, 5, 4), "num_weights": 5, "padding_idx": -1}
    return {}


def _fake_quantize(c: Ctx, base: str) -> dict:
    import torch

    per_tensor = "per_tensor" in base
    learnable = "learnable" in base
    n = 1 if per_tensor else 3
    zero_point = c.randint(0, 10, n, dtype=torch.float32 if learnable else torch.int32)
    return {
        "self": c.randn(3, 4) * 4,
        "grad": c.randn(3, 4),
        "scale": c.rand(n, low=0.05, high=0.2, dtype=torch.float32),
        "zero_point": zero_point,
        "fake_quant_enabled": torch.tensor([1]),
        "axis": 0,
        "quant_min": 0,
        "quant_max": 255,
        "grad_factor": 1.0,
    }


def _sobol_state():
    import torch

    state = torch.zeros(2, 30, dtype=torch.int64)
    torch._sobol_engine_initialize_state_(state, 2)
    return state


def _misc(c: Ctx, base: str) -> dict:
    import torch

    table: dict[str, Callable[[], dict]] = {
        "einsum": lambda: {"equation": "ij,jk->ik", "tensors": [c.randn(3, 4), c.randn(4, 2)]},
        "tensordot": lambda: {"self": c.randn(3, 4), "other": c.randn(4, 2), "dims_self": [1], "dims_other": [0]},
        "movedim": lambda: {"self": c.randn(2, 3, 4), "source": [0, 1], "destination": [2, 0]},
        "moveaxis": lambda: {"self": c.randn(2, 3, 4), "source": [0, 1], "destination": [2, 0]},
        "view_as_complex_copy": lambda: {"self": c.randn(3, 2)},
        "_reshape_from_tensor": lambda: {"self": c.randn(3, 4), "shape": OnCpu(torch.tensor([2, 6]))},
        "histogramdd": lambda: {
            "self": c.randn(6, 2),
            "bins": [
                torch.tensor([-3.0, 0.0, 3.0], dtype=c.dtype),
                torch.tensor([-2.0, -1.0, 1.0, 2.0], dtype=c.dtype),
            ],
        },
        "_histogramdd_bin_edges": lambda: {"self": c.randn(6, 2), "bins": [2, 3]},
        "_compute_linear_combination": lambda: {"input": c.randn(3, 4), "coefficients": c.randn(2, 3)},
        "_cummax_helper": lambda: {
            "self": c.randn(3, 4),
            "values": c.randn(3, 4),
            "indices": torch.zeros(3, 4, dtype=torch.int64),
            "dim": 1,
        },
        "_cummin_helper": lambda: {
            "self": c.randn(3, 4),
            "values": c.randn(3, 4),
            "indices": torch.zeros(3, 4, dtype=torch.int64),
            "dim": 1,
        },
        "rrelu_with_noise": lambda: {"self": c.randn(3, 4), "noise": c.randn(3, 4), "training": False},
        "set": lambda: {
            "self": c.randn(2),
            "source": (lambda t: ByType({"Tensor": t, "Storage": StorageOf(t)}))(c.randn(12)),
            "storage_offset": 1,
            "size": [2, 3],
            "stride": [3, 1],
        },
        "_cast_Byte": lambda: {"self": c.rand(3, 4, low=0.0, high=200.0)},  # C++ leaves negative -> uint8 undefined
        "_remove_batch_dim": lambda: {"self": c.randn(3, 4), "level": 1, "batch_size": 3, "out_dim": 0},
        "_int_mm": lambda: {
            "self": c.randint(-8, 8, 4, 8, dtype=torch.int8),
            "mat2": c.randint(-8, 8, 8, 4, dtype=torch.int8),
        },
        "_weight_int8pack_mm": lambda: {
            "self": c.randn(4, 8, dtype=torch.float32),
            "mat2": c.randint(-8, 8, 4, 8, dtype=torch.int8),
            "scales": c.rand(4, low=0.5, high=1.5, dtype=torch.float32),
        },
        # SobolEngine's state: (dimension, MAXBIT=30) int64, filled by _sobol_engine_initialize_state_
        "_sobol_engine_initialize_state": lambda: {"self": torch.zeros(2, 30, dtype=torch.int64), "dimension": 2},
        "_sobol_engine_scramble": lambda: {
            "self": _sobol_state(),
            "ltm": torch.tril(c.randint(0, 2, 2, 30, 30)),
            "dimension": 2,
        },
        "_sobol_engine_draw": lambda: {
            "quasi": torch.zeros(2, dtype=torch.int64),
            "n": 3,
            "sobolstate": _sobol_state(),
            "dimension": 2,
            "num_generated": 0,
            "dtype": torch.float32,
        },
        "_sobol_engine_ff": lambda: {
            "self": torch.zeros(2, dtype=torch.int64),
            "n": 3,
            "sobolstate": _sobol_state(),
            "dimension": 2,
            "num_generated": 0,
        },
        "_test_check_tensor": lambda: {"self": c.randint(0, 2, 3).bool()},
        "fractional_max_pool2d": lambda: {
            "self": c.randn(1, 2, 5, 5),
            "kernel_size": [2, 2],
            "output_size": [2, 2],
            "random_samples": c.rand(1, 2, 2),
        },
        "fractional_max_pool3d": lambda: {
            "self": c.randn(1, 2, 5, 5, 5),
            "kernel_size": [2, 2, 2],
            "output_size": [2, 2, 2],
            "random_samples": c.rand(1, 2, 3),
        },
        # jagged (nested-like) values of 2 rows of lengths 2 and 3, padded to 3
        "_jagged_to_padded_dense_forward": lambda: {
            "values": c.randn(5, 3),
            "offsets": [torch.tensor([0, 2, 5])],
            "max_lengths": [3],
            "padding_value": 0.0,
        },
        "_padded_dense_to_jagged_forward": lambda: {
            "dense": c.randn(2, 3, 3),
            "offsets": [torch.tensor([0, 2, 5])],
            "total_L": 5,
        },
        # weight norm over dim 0: g and the norms have v's shape with the other dims 1
        "_weight_norm_interface": lambda: {"v": c.randn(3, 4), "g": c.randn(3, 1), "dim": 0},
        "_weight_norm_interface_backward": lambda: (
            lambda v, g: {
                "grad_w": c.randn(3, 4),
                "saved_v": v,
                "saved_g": g,
                "saved_norms": v.norm(dim=1, keepdim=True),
                "dim": 0,
            }
        )(c.randn(3, 4), c.randn(3, 1)),
        "split_copy": lambda: {"self": c.randn(5, 2), "split_size": 2, "dim": 0},
        "complex": lambda: {"real": c.randn(3, 3), "imag": c.randn(3, 3)},
        "polar": lambda: {"abs": c.rand(3, 3), "angle": c.randn(3, 3)},
    }
    make = table.get(base)
    return make() if make else {}


# ---------------------------------------------------------------------------------------------
# The table: (pattern on the base name, builder). First match wins.

HINTS: list[tuple[str, Callable[[Ctx, str], dict]]] = [
    (r"_?upsample_\w+_backward|_?upsample_\w+[123]d", _upsample),
    (
        r"conv_tbc|_?convolution(_mode|_double_backward)?|conv_transpose[123]d|slow_conv\w*|thnn_conv2d|_slow_conv2d_\w+"
        r"|mkldnn_convolution|_nnpack_spatial_convolution",
        _conv,
    ),
    (r"batch_norm|_batch_norm\w*|_native_batch_norm_legit\w*", _batch_norm),
    (r"layer_norm|rms_norm", _norm_over_last),
    (r"_thnn_fused_lstm_cell_backward", _fused_lstm_cell_backward),
    (r"lstm|gru|rnn_tanh|rnn_relu|lstm_cell|gru_cell|rnn_tanh_cell|rnn_relu_cell", _rnn),
    (r"_pack_padded_sequence\w*|_pad_packed_sequence", _packed),
    (r"_fused_(adam|adamw|sgd|adagrad)", _fused_optimiser),
    (r"_foreach_addc(mul|div)", _foreach_pointwise_tensor),
    (r"_amp_update_scale", _amp_update_scale),
    (r"nll_loss(2d|_nd)?|multilabel_margin_loss|cosine_embedding_loss|ctc_loss", _loss),
    (
        r"embedding_bag|_embedding_bag(_forward_only|_backward|_dense_backward|_per_sample_weights_backward)?",
        _embedding,
    ),
    (r"linalg_cholesky(_ex)?|lu_solve|orgqr|linalg_tensorinv|linalg_cond|linalg_norm|nuclear_norm", _linalg),
    (r"grid_sampler|_grid_sampler_2d_cpu_fallback(_backward)?", _grid_sampler),
    (r"affine_grid_generator(_backward)?", _affine_grid),
    (r"_native_multi_head_attention|_transformer_encoder_layer_fwd", _attention),
    (r"stft|istft", _stft),
    (r"glu_jvp|glu_backward_jvp", _glu_jvp),
    (
        r"index_select_backward|value_selecting_reduction_backward|trace_backward|embedding_backward",
        _backward_of_reduction,
    ),
    (r"_?fake_quantize\w*", _fake_quantize),
    (r"gradient", _gradient),
    (r"\w+", _misc),
]


def hint_for(base: str) -> Callable[[Ctx], dict] | None:
    """The builder for an op family (`base`: the name without namespace and overload; a trailing
    `_` of in-place names is ignored), or None."""
    base = base.rstrip("_") if not base.startswith("__") else base
    for pattern, make in HINTS:
        if re.fullmatch(pattern, base):
            if make is _misc and not _misc_has(base):
                return None
            return lambda c, _make=make: _make(c, base)
    return None


def _misc_has(base: str) -> bool:
    import torch

    return bool(_misc(Ctx(torch.Generator().manual_seed(0), torch.float32), base))


def hinted_types(base: str) -> dict[str, set[str]]:
    """Argument name -> the schema types the family's builder supplies beyond the schema builder's
    own (a `Storage`): static_untriable does not call those arguments unbuildable."""
    import torch

    make = hint_for(base)
    if make is None:
        return {}
    out: dict[str, set[str]] = {}
    try:
        values = make(Ctx(torch.Generator().manual_seed(0), torch.float32))
    except Exception:  # a builder that fails here fails in the trial too, where it is reported
        return {}
    for name, value in values.items():
        if isinstance(value, ByType):
            out[name] = {k for k, v in value.by_type.items() if isinstance(v, StorageOf)}
        elif isinstance(value, StorageOf):
            out[name] = {"Storage"}
    return out
