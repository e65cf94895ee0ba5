"""ResNet-18 for the training-step benchmarks: in PyTorch (torchvision's resnet18, written out here so
that the benchmarks need no torchvision) and the same step hand-written in JAX, jitted whole.

The PyTorch model is torchvision's architecture and initialisation: a 7x7 stride-2 stem, BatchNorm,
in-place ReLU, 3x3 max pool, four stages of two BasicBlocks (64, 128, 256, 512 channels, a 1x1
stride-2 conv + BatchNorm shortcut where the shape changes), global average pool and a linear head;
convs Kaiming-normal (fan_out, relu), BatchNorm weight 1 and bias 0. A step is SGD with momentum 0.9
and weight decay 1e-4 in training mode, so every step also updates the BatchNorm running statistics
(torchvision 0.28's wheel does not load against torch 2.13.0+cpu here, so the model is written
out, block for block in torchvision's order). The input is small (batch 8, 3x32x32 as CIFAR's, 10 classes; the stem
and stages take it to 1x1 at the last stage) so a step takes a few hundred milliseconds on two CPU
cores: at 64x64 a step took 4 s on this shared machine and the benchmark 13 minutes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch
from torch import nn

BATCH, SIDE, CLASSES = 8, 32, 10
STAGES = (64, 128, 256, 512)
LR, MOMENTUM, WEIGHT_DECAY, BN_MOMENTUM, BN_EPS = 0.01, 0.9, 1e-4, 0.1, 1e-5


# --- PyTorch --------------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x if self.downsample is None else self.downsample(x)
        return self.relu(out)


class ResNet18(nn.Module):
    def __init__(self, classes: int = CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        for i, planes in enumerate(STAGES):
            stride = 1 if i == 0 else 2
            setattr(
                self,
                f"layer{i + 1}",
                nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes, 1)),
            )
            inplanes = planes
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def torch_resnet():
    """compile_step.torch_step's builder: model, (input, target), optimizer factory, loss."""
    model = ResNet18()
    data = torch.randn(BATCH, 3, SIDE, SIDE), torch.randint(0, CLASSES, (BATCH,))

    def opt(params):
        return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)

    return model, data, opt, nn.functional.cross_entropy


# --- JAX ------------------------------------------------------------------------------------------


def _conv(x, w, stride: int, padding: int):
    return jax.lax.conv_general_dilated(
        x, w, (stride, stride), [(padding, padding)] * 2, dimension_numbers=("NCHW", "OIHW", "NCHW")
    )


def _batch_norm(x, p, stats):
    """Training-mode BatchNorm2d: normalise by the batch's biased variance, update the running
    statistics with the unbiased one, as PyTorch does."""
    mean = x.mean((0, 2, 3))
    var = x.var((0, 2, 3))
    n = x.size // x.shape[1]
    new_stats = {
        "mean": (1 - BN_MOMENTUM) * stats["mean"] + BN_MOMENTUM * mean,
        "var": (1 - BN_MOMENTUM) * stats["var"] + BN_MOMENTUM * var * (n / (n - 1)),
    }
    shape = (1, -1, 1, 1)
    y = (x - mean.reshape(shape)) * jax.lax.rsqrt(var.reshape(shape) + BN_EPS)
    return y * p["weight"].reshape(shape) + p["bias"].reshape(shape), new_stats


def _block(x, p, stats, stride: int):
    new = {}
    out, new["bn1"] = _batch_norm(_conv(x, p["conv1"], stride, 1), p["bn1"], stats["bn1"])
    out, new["bn2"] = _batch_norm(_conv(jax.nn.relu(out), p["conv2"], 1, 1), p["bn2"], stats["bn2"])
    if "down_conv" in p:
        x, new["down_bn"] = _batch_norm(_conv(x, p["down_conv"], stride, 0), p["down_bn"], stats["down_bn"])
    return jax.nn.relu(out + x), new


def _max_pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 3, 3), (1, 1, 2, 2), [(0, 0), (0, 0), (1, 1), (1, 1)])


def jax_resnet():
    """(params, BatchNorm statistics, loss(params, stats, x, y) -> (loss, new stats), x, y)."""
    keys = iter(jax.random.split(jax.random.key(0), 64))

    def conv(o, i, k):
        return jax.random.normal(next(keys), (o, i, k, k), jnp.float32) * (2 / (o * k * k)) ** 0.5

    def bn(c):
        return {"weight": jnp.ones(c, jnp.float32), "bias": jnp.zeros(c, jnp.float32)}

    def stat(c):
        return {"mean": jnp.zeros(c, jnp.float32), "var": jnp.ones(c, jnp.float32)}

    params = {"conv1": conv(64, 3, 7), "bn1": bn(64), "blocks": []}
    stats = {"bn1": stat(64), "blocks": []}
    inplanes, strides = 64, []
    for i, planes in enumerate(STAGES):
        for b in range(2):
            stride = 2 if i and not b else 1
            p = {
                "conv1": conv(planes, inplanes, 3),
                "bn1": bn(planes),
                "conv2": conv(planes, planes, 3),
                "bn2": bn(planes),
            }
            s = {"bn1": stat(planes), "bn2": stat(planes)}
            if stride != 1 or inplanes != planes:
                p["down_conv"], p["down_bn"], s["down_bn"] = conv(planes, inplanes, 1), bn(planes), stat(planes)
            params["blocks"].append(p)
            stats["blocks"].append(s)
            strides.append(stride)
            inplanes = planes
    bound = 512**-0.5
    params["fc_w"] = jax.random.uniform(next(keys), (CLASSES, 512), jnp.float32, -bound, bound)
    params["fc_b"] = jax.random.uniform(next(keys), (CLASSES,), jnp.float32, -bound, bound)
    x = jax.random.normal(next(keys), (BATCH, 3, SIDE, SIDE), jnp.float32)
    y = jax.random.randint(next(keys), (BATCH,), 0, CLASSES)

    def loss_fn(params, stats, x, y):
        new = {"blocks": []}
        h, new["bn1"] = _batch_norm(_conv(x, params["conv1"], 2, 3), params["bn1"], stats["bn1"])
        h = _max_pool(jax.nn.relu(h))
        for p, s, stride in zip(params["blocks"], stats["blocks"], strides):
            h, n = _block(h, p, s, stride)
            new["blocks"].append(n)
        logits = h.mean((2, 3)) @ params["fc_w"].T + params["fc_b"]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=-1)), new

    return params, stats, loss_fn, x, y


def jax_step():
    """(step, compile seconds): the whole SGD-momentum step with PyTorch's weight decay, jitted."""
    import time

    params, stats, loss_fn, x, y = jax_resnet()

    def update(params, buf, stats):
        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, stats, x, y)
        grads = jax.tree.map(lambda g, p: g + WEIGHT_DECAY * p, grads, params)
        buf = jax.tree.map(lambda b, g: MOMENTUM * b + g, buf, grads)
        return loss, jax.tree.map(lambda p, b: p - LR * b, params, buf), buf, new_stats

    state = {"params": params, "buf": jax.tree.map(jnp.zeros_like, params), "stats": stats}
    t0 = time.perf_counter()
    run = jax.jit(update, donate_argnums=(0, 1, 2)).lower(state["params"], state["buf"], state["stats"]).compile()
    seconds = time.perf_counter() - t0

    def step():
        loss, state["params"], state["buf"], state["stats"] = run(state["params"], state["buf"], state["stats"])
        return float(loss)

    return step, seconds
