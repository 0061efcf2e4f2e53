"""timm models by architecture name (`timm:<name>`), random weights, nothing downloaded.

The input size comes from the model's pretrained_cfg (the resolution it was designed for), unless
the spec's kwargs give `img_size` (which timm's transformers take) or `input_size: [C, H, W]`
(sweeper's own key, taken out before timm sees the kwargs).
"""

from __future__ import annotations

import difflib
from typing import Any

import torch

from sweeper.zoo.bundle import Batch, Bundle, mse_loss, xent_loss


def _timm() -> Any:
    try:
        import timm
    except ImportError:
        raise ValueError("timm: models need the timm package "
                         "(pip install 'sweeper[timm]' or pip install timm)") from None
    return timm


def model_input_size(model: Any, img_size: Any = None) -> tuple[int, int, int]:
    """(channels, height, width) of the model's input, from `img_size` or its pretrained_cfg."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    channels, height, width = cfg.get("input_size", (3, 224, 224))
    if img_size is not None:
        height, width = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
    return int(channels), int(height), int(width)


def build(arch: str, input_size: list[int] | None = None, **kwargs: Any) -> Bundle:
    """timm.create_model(arch, pretrained=False, **kwargs) and image batches of its input size."""
    timm = _timm()
    if not timm.is_model(arch):
        near = difflib.get_close_matches(arch, timm.list_models(), n=3)
        hint = f" (close: {', '.join(near)})" if near else " (see timm.list_models())"
        raise ValueError(f"timm has no model {arch!r}{hint}")
    model = timm.create_model(arch, pretrained=False, **kwargs)
    channels, height, width = tuple(input_size) if input_size else model_input_size(model, kwargs.get("img_size"))
    num_classes = int(getattr(model, "num_classes", 0) or 0)

    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        x = torch.randn(batch_size, channels, height, width, generator=gen)
        y = torch.randint(0, num_classes, (batch_size,), generator=gen) if num_classes else None
        return Batch(args=(x,), items=batch_size, labels=y)

    return Bundle(model, make, xent_loss if num_classes else mse_loss)

