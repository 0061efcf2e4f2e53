"""A trial's input stream on its device: the batches in order, their shapes, real and padded
tokens, and the input dimensions marked dynamic. Built once per trial, before any timing,
from the lengths (or image plan) that `trials.expand` drew into the trial."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from sweeper import zoo
from sweeper.spec import lengths as workloads
from sweeper.spec.trials import Trial
from sweeper.zoo.bundle import Batch, Bundle

log = logging.getLogger(__name__)

Shape = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass
class StreamBatch:
    batch: Batch
    shape: Shape
    """Every tensor input's shape: a static compile needs one graph per distinct value."""
    padded_tokens: int | None = None
    """Tokens computed, padding included (batch x padded length); None for images."""


@dataclass
class Stream:
    batches: list[StreamBatch]

    @property
    def items(self) -> int:
        return sum(b.batch.items for b in self.batches)

    @property
    def real_tokens(self) -> int | None:
        if any(b.batch.tokens is None for b in self.batches):
            return None
        return sum(b.batch.tokens for b in self.batches)

    @property
    def pad_waste(self) -> float | None:
        """Padding tokens / all tokens computed."""
        return workloads.pad_waste(self.real_tokens, sum(b.padded_tokens or 0 for b in self.batches))

    @property
    def n_shapes(self) -> int:
        return len({b.shape for b in self.batches})


def _inputs(batch: Batch) -> dict[str, Any]:
    return {**{f"arg{i}": a for i, a in enumerate(batch.args)}, **batch.kwargs}


def shape_of(batch: Batch) -> Shape:
    return tuple((k, tuple(v.shape)) for k, v in _inputs(batch).items() if isinstance(v, torch.Tensor))


def _position_cap(trial: Trial) -> int | None:
    if trial.model.source != "zoo":
        return None
    return zoo.REGISTRY[trial.model_name].max_seq_len


def _token_batches(trial: Trial, bundle: Bundle, gen: torch.Generator) -> list[tuple[Batch, int]]:
    if bundle.make_padded is None:
        raise ValueError(f"model {trial.model_name} cannot build variable-length batches: a token stream "
                         "needs a Bundle with make_padded (the NLP zoo models have one)")
    plan = workloads.token_plan(trial.workload.lengths, trial.batch_size, trial.bucketing,
                                _position_cap(trial))
    return [(bundle.make_padded(chunk, pad_to, gen), len(chunk) * pad_to) for chunk, pad_to in plan]


def _image_batches(trial: Trial, bundle: Bundle, gen: torch.Generator) -> list[tuple[Batch, None]]:
    out: list[tuple[Batch, None]] = []
    for items, size in trial.workload.images:
        base = bundle.make_batch(items, None, gen)
        if size is not None:
            x = base.args[0] if base.args else None
            if not isinstance(x, torch.Tensor) or x.dim() != 4:
                raise ValueError(f"model {trial.model_name}: image resolutions need a batch whose first "
                                 "argument is a (B, C, H, W) image tensor")
            image = torch.randn(items, x.shape[1], size, size, generator=gen, dtype=x.dtype)
            base = Batch((image, *base.args[1:]), base.kwargs, base.items, base.tokens, base.labels)
        out.append((base, None))
    return out


def build_stream(trial: Trial, bundle: Bundle, device: torch.device) -> Stream:
    """The trial's batches on `device`, with varying dimensions marked dynamic if asked."""
    assert trial.workload is not None
    gen = torch.Generator().manual_seed(trial.workload.seed)
    made = (_token_batches(trial, bundle, gen) if trial.workload.lengths is not None
            else _image_batches(trial, bundle, gen))
    stream = Stream([StreamBatch(b.to(device), shape_of(b), padded) for b, padded in made])
    if trial.mark_dynamic:
        mark_varying_dims(stream)
    return stream


def varying_dims(stream: Stream) -> dict[str, list[int]]:
    """Per input: the dimensions whose size changes over the stream."""
    sizes: dict[str, set[tuple[int, ...]]] = {}
    for b in stream.batches:
        for name, shape in b.shape:
            sizes.setdefault(name, set()).add(shape)
    out: dict[str, list[int]] = {}
    for name, shapes in sizes.items():
        ranks = {len(s) for s in shapes}
        if len(ranks) == 1:
            dims = [d for d in range(ranks.pop()) if len({s[d] for s in shapes}) > 1]
            if dims:
                out[name] = dims
    return out


def mark_varying_dims(stream: Stream) -> dict[str, list[int]]:
    """torch._dynamo.mark_dynamic on every varying dimension (sizes 0 and 1 stay specialized)."""
    dims = varying_dims(stream)
    for b in stream.batches:
        for name, tensor in _inputs(b.batch).items():
            for d in dims.get(name, []):
                if isinstance(tensor, torch.Tensor) and tensor.shape[d] >= 2:
                    torch._dynamo.mark_dynamic(tensor, d)
    log.debug("marked dynamic: %s", dims)
    return dims


def real_positions(out: torch.Tensor, batch: Batch) -> torch.Tensor:
    """The output at real (unpadded) positions when it has a (batch, sequence) prefix; else all of it."""
    mask = batch.kwargs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and out.dim() >= 2 and tuple(out.shape[:2]) == tuple(mask.shape):
        return out[mask.to(out.device).bool()]
    return out
