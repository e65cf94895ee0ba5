"""Small models of the four families real programs use, and a training loop that runs the same
steps on CPU and on jax from the same initial weights and data."""

from __future__ import annotations

import copy

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 5))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class Transformer(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, length=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        h = self.embed(tokens) + self.pos[:n]
        h = self.layer(h, src_mask=mask, is_causal=True)
        return self.out(self.norm(h))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 16, num_layers=2, batch_first=True)
        self.gru = nn.GRU(16, 16, batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        h, _ = self.lstm(x)
        h, _ = self.gru(h)
        return self.head(h[:, -1])


def batch(family: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    if family == "mlp":
        return torch.randn(16, 20, generator=g), torch.randint(0, 5, (16,), generator=g)
    if family == "cnn":
        return torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 5, (4,), generator=g)
    if family == "transformer":
        tokens = torch.randint(0, 50, (4, 12), generator=g)
        return tokens, torch.randint(0, 50, (4, 12), generator=g)
    if family == "rnn":
        return torch.randn(4, 7, 6, generator=g), torch.randint(0, 5, (4,), generator=g)
    raise ValueError(family)


MODELS = {"mlp": MLP, "cnn": CNN, "transformer": Transformer, "rnn": Recurrent}


def loss_fn(family, logits, target):
    if family == "transformer":
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1), label_smoothing=0.1
        )
    return nn.functional.cross_entropy(logits, target)


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.01),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3),
}


def train(model: nn.Module, family: str, device: str, optimizer: str = "adam", steps: int = 3):
    """Losses of `steps` training steps (with gradient clipping), and the final state dict on CPU."""
    opt = OPTIMIZERS[optimizer](model.parameters())
    losses = []
    for step in range(steps):
        x, y = (t.to(device) for t in batch(family, seed=step))
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(family, model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def twin(family: str, seed: int = 0):
    """The same freshly initialised model twice: one for CPU, one moved to jax."""
    torch.manual_seed(seed)
    cpu = MODELS[family]()
    return cpu, copy.deepcopy(cpu).to("jax")
