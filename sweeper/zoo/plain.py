"""A user's plain nn.Module made a Bundle: inputs from the spec's `input` section, a loss from it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from sweeper.zoo.bundle import Batch, Bundle, mse_loss, xent_loss


def to_bundle(built: Any, spec: Any, where: str) -> Bundle:
    """`built` as a Bundle: itself if a factory returned one, else an nn.Module fed from `spec`
    (a spec's InputSpec: kind, channels, size, vocab_size, shape, num_classes)."""
    if isinstance(built, Bundle):
        return built
    if not isinstance(built, nn.Module):
        raise TypeError(f"{where} returned {type(built).__name__}, not an nn.Module or Bundle")
    if spec is None:
        raise ValueError(f"{where} returned an nn.Module: give the model an 'input' section")
    num_classes = spec.num_classes

    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        if spec.kind == "image":
            x = torch.randn(batch_size, spec.channels, spec.size, spec.size, generator=gen)
        elif spec.kind == "tokens":
            x = torch.randint(0, spec.vocab_size, (batch_size, seq_len or 128), generator=gen)
        else:
            x = torch.randn(batch_size, *spec.shape, generator=gen)
        labels = torch.randint(0, num_classes, (batch_size,), generator=gen) if num_classes else None
        tokens = batch_size * (seq_len or 128) if spec.kind == "tokens" else None
        return Batch(args=(x,), items=batch_size, tokens=tokens, labels=labels)

    return Bundle(built, make, xent_loss if num_classes else mse_loss)
