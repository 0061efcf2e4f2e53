"""What a model builder returns: the module plus how to feed it, score it and count its items."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class Batch:
    """One batch of inputs: call as model(*args, **kwargs)."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    items: int = 0
    """Samples in the batch (images, sequences)."""
    tokens: int | None = None
    """Real (non-padding) tokens for NLP batches; None for vision."""
    labels: torch.Tensor | None = None

    def to(self, device: torch.device) -> Batch:
        def mv(x: Any) -> Any:
            return x.to(device, non_blocking=True) if isinstance(x, torch.Tensor) else x

        return Batch(tuple(mv(a) for a in self.args), {k: mv(v) for k, v in self.kwargs.items()},
                     self.items, self.tokens, mv(self.labels))


@dataclass
class Bundle:
    """A model and its input/loss conventions. User factories may return one directly."""

    model: nn.Module
    make_batch: Callable[[int, int | None, torch.Generator], Batch]
    """(batch_size, seq_len or None, generator) -> a Batch on the CPU."""
    loss: Callable[[Any, Batch], torch.Tensor]
    """Training loss from the model's output and the batch."""
    make_padded: Callable[[Sequence[int], int, torch.Generator], Batch] | None = None
    """(sequence lengths, padded length, generator) -> a right-padded Batch with an attention
    mask, so padding does not change the outputs at real positions. Token streams need it."""


def output_tensor(out: Any) -> torch.Tensor:
    """The tensor compared for accuracy: logits of a HF output, the first tensor otherwise."""
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, torch.Tensor):
                return o
    raise TypeError(f"cannot find an output tensor in {type(out).__name__}")


def mse_loss(out: Any, batch: Batch) -> torch.Tensor:
    return output_tensor(out).float().pow(2).mean()


def xent_loss(out: Any, batch: Batch) -> torch.Tensor:
    assert batch.labels is not None
    return nn.functional.cross_entropy(output_tensor(out).float(), batch.labels)
