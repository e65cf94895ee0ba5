"""Argument builders of the other families: fused optimisers and scalers, linear algebra, sampling
grids, attention, signal processing, Jacobian-vector products, gradients, backward ops of
reductions, fake quantization (facts/arguments: the table that picks them)."""

from __future__ import annotations

from jaxdev.audit.facts.arguments.values import ByType, Ctx, OnCpu, StorageOf  # noqa: F401

# ---------------------------------------------------------------------------------------------
# Optimisers and scalers: two params of shape (3, 3)


def fused_optimiser(c: Ctx, base: str) -> dict:
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


def foreach_pointwise_tensor(c: Ctx, base: str) -> dict:
    return {
        "self": [c.randn(3, 3), c.randn(2)],
        "tensor1": [c.randn(3, 3), c.randn(2)],
        "tensor2": [c.rand(3, 3, low=0.5, high=1.5), c.rand(2, low=0.5, high=1.5)],
        "scalars": OnCpu(c.randn(2, dtype=__import__("torch").float64)),
    }


def amp_update_scale(c: Ctx, base: str) -> dict:
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
# Linear algebra


def linalg(c: Ctx, base: str) -> dict:
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


def grid_sampler(c: Ctx, base: str) -> dict:
    return {
        "input": c.randn(1, 2, 4, 4),
        "grid": c.rand(1, 3, 3, 2, low=-1.0, high=1.0),
        "grad_output": c.randn(1, 2, 3, 3),
        "interpolation_mode": 0,
        "padding_mode": 0,
        "align_corners": False,
    }


def affine_grid(c: Ctx, base: str) -> dict:
    return {"theta": c.randn(2, 2, 3), "grad": c.randn(2, 4, 4, 2), "size": [2, 1, 4, 4], "align_corners": False}


def attention(c: Ctx, base: str) -> dict:
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


def stft(c: Ctx, base: str) -> dict:
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


def glu_jvp(c: Ctx, base: str) -> dict:
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


def gradient(c: Ctx, base: str) -> dict:
    import torch

    coords = torch.cumsum(c.rand(3, low=0.5, high=1.5), 0)  # increasing coordinates along dim 0
    return {
        "self": c.randn(3, 4),
        "spacing": ByType({"List[number]": [2.0], "List[Tensor]": [coords]}),
        "dim": ByType({"List[int]": [0], "Optional[int]": 0}),
        "edge_order": 1,
    }


def backward_of_reduction(c: Ctx, base: str) -> dict:
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


def fake_quantize(c: Ctx, base: str) -> dict:
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
