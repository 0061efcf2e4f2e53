"""torchvision models with random weights and random image batches."""

from __future__ import annotations

import torch
import torchvision

from sweeper.zoo.bundle import Batch, Bundle, xent_loss


def _images(size: int, num_classes: int):
    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        x = torch.randn(batch_size, 3, size, size, generator=gen)
        y = torch.randint(0, num_classes, (batch_size,), generator=gen)
        return Batch(args=(x,), items=batch_size, labels=y)

    return make


def _torchvision(name: str, size: int = 224, num_classes: int = 1000, **kwargs) -> Bundle:
    model = torchvision.models.get_model(name, weights=None, num_classes=num_classes, **kwargs)
    return Bundle(model, _images(size, num_classes), xent_loss)


def resnet18(**kw) -> Bundle:
    return _torchvision("resnet18", **kw)


def resnet50(**kw) -> Bundle:
    return _torchvision("resnet50", **kw)


def vit_b_16(**kw) -> Bundle:
    return _torchvision("vit_b_16", **kw)


def mobilenet_v3_large(**kw) -> Bundle:
    return _torchvision("mobilenet_v3_large", **kw)


def convnext_tiny(**kw) -> Bundle:
    return _torchvision("convnext_tiny", **kw)


def efficientnet_b0(**kw) -> Bundle:
    return _torchvision("efficientnet_b0", **kw)


def resnet18_tiny(size: int = 32, num_classes: int = 10) -> Bundle:
    return _torchvision("resnet18", size=size, num_classes=num_classes)


def _vit(size: int, num_classes: int, **arch) -> Bundle:
    model = torchvision.models.VisionTransformer(image_size=size, num_classes=num_classes, **arch)
    return Bundle(model, _images(size, num_classes), xent_loss)


def vit_ti_16(size: int = 224, num_classes: int = 1000) -> Bundle:
    """ViT-Ti/16 (DeiT-Tiny's shape): torchvision's VisionTransformer, hidden 192, 12 layers, 3 heads."""
    return _vit(size, num_classes, patch_size=16, num_layers=12, num_heads=3, hidden_dim=192, mlp_dim=768)


def vit_tiny(size: int = 32, num_classes: int = 10) -> Bundle:
    return _vit(size, num_classes, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128)
