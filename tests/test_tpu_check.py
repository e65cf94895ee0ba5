"""benchmarks/tpu_check.sh's parts that run without a TPU or torchax: the hand-written JAX twin computes
what the PyTorch GPT computes (loss, an AdamW step, greedy decoding), and the report marks rows a time
limit cut and prints ratios (the torchax import shim's test: tests/audit/test_peers.py)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import tpu_gpt
import tpu_gpt_jax
import tpu_report


@pytest.fixture(scope="module")
def cfg():
    return tpu_gpt.Config("quick")


def test_twin_loss_and_adamw_step_match_torch(cfg):
    model = tpu_gpt.torch_model(cfg, torch.float32)
    x, y, _ = (torch.from_numpy(a) for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())
    losses = []
    for _ in range(2):  # the second loss is computed after one AdamW update
        opt.zero_grad()
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    step, _, _ = tpu_gpt_jax.train_step(cfg, np.float32)
    twin = [float(step()), float(step())]
    np.testing.assert_allclose(twin, losses, rtol=2e-5)


def test_twin_decodes_the_same_tokens(cfg):
    model = tpu_gpt.torch_model(cfg, torch.float32).eval()
    caches = tpu_gpt.empty_caches(cfg, torch.float32, "cpu")
    token, tokens = torch.zeros(1, 1, dtype=torch.long), []
    with torch.no_grad():
        for i in range(cfg.new_tokens):
            token = model.decode_step(token, caches, torch.tensor([i]))
            tokens.append(int(token))
    twin = [int(t[0, 0]) for t in tpu_gpt_jax.generate(cfg, np.float32)()]
    assert twin == tokens


def test_report_marks_cut_rows_and_prints_ratios(tmp_path):
    key = {"workload": "LM train bf16"}
    lines = [
        {"run": "r", "t": 0, "event": "unit-start", "unit": "lm", "impl": "jaxdev"},
        {"run": "r", "t": 1, **key, "impl": "jaxdev", "mode": "compiled", "first_s": 30.0},
        {"run": "r", "t": 2, **key, "impl": "jaxdev", "mode": "compiled", "ms": 20.0, "event": "done"},
        {"run": "r", "t": 10, **key, "impl": "jaxdev", "mode": "op", "event": "start"},
        {"run": "r", "t": 200, "event": "killed", "unit": "lm", "impl": "jaxdev"},
        {"run": "r", "t": 201, **key, "impl": "torchax", "mode": "jitted", "ms": 10.0, "loss1": 9.0, "event": "done"},
        {"run": "r", "t": 202, **key, "impl": "jax.jit", "mode": "hand-written", "ms": 8.0, "loss1": 9.0},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows, *_ = tpu_report.load(str(path))
    assert rows[("LM train bf16", "jaxdev", "op")]["cut"] == "first step > 190 s (cut)"
    text = "\n".join(tpu_report.table(rows))
    assert "2.00x" in text and "2.50x" in text  # compiled against torchax and against jax.jit
    assert tpu_report.checks(rows)["loss1"]["LM train bf16"]["torchax jitted"]["within"]
