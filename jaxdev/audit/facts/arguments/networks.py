"""Argument builders of neural-network families: convolutions, upsampling, normalisation, recurrent
networks and packed sequences, losses, embeddings (facts/arguments: the table that picks them)."""

from __future__ import annotations

import re

from jaxdev.audit.facts.arguments.values import ByType, Ctx, OnCpu, StorageOf  # noqa: F401

# ---------------------------------------------------------------------------------------------
# Convolutions: N=2, C_in=3, C_out=4, spatial 5, kernel 2 (groups 1)


def _spatial(base: str) -> int:
    m = re.search(r"([123])d", base)
    return int(m.group(1)) if m else 2


def conv(c: Ctx, base: str) -> dict:
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


def upsample(c: Ctx, base: str) -> dict:
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


def batch_norm(c: Ctx, base: str) -> dict:
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


def norm_over_last(c: Ctx, base: str) -> dict:
    return {"input": c.randn(2, 3, 4), "normalized_shape": [4], "weight": c.randn(4), "bias": c.randn(4), "eps": 1e-5}


# ---------------------------------------------------------------------------------------------
# Recurrent networks: input size 4, hidden 3, seq 3, batch 2, one layer, one direction


_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1, "_thnn_fused_lstm_cell": 4, "_thnn_fused_gru_cell": 3}


def rnn(c: Ctx, base: str) -> dict:
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


def packed(c: Ctx, base: str) -> dict:
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


def fused_lstm_cell_backward(c: Ctx, base: str) -> dict:
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
# Losses: 4 samples of 3 classes


def loss(c: Ctx, base: str) -> dict:
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


def embedding(c: Ctx, base: str) -> dict:
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
