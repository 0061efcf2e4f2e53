"""Two models as a user brings them, through `factory:` (the sweep-cost question's user sweep): a
Llama-style decoder from transformers' config classes and a windowed-attention vision transformer
(torchvision's Swin-T), random weights, nothing downloaded."""

from __future__ import annotations

from torch import nn


def llama_decoder(layers: int = 8, width: int = 1024, vocab: int = 32000) -> nn.Module:
    """A Llama-style causal LM (GQA 16/4 heads, SwiGLU MLP of 2.75x width): 156M parameters."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=width, intermediate_size=int(2.75 * width), num_hidden_layers=layers,
                         num_attention_heads=16, num_key_value_heads=4, vocab_size=vocab,
                         max_position_embeddings=2048)
    return LlamaForCausalLM(config)


def swin_tiny() -> nn.Module:
    """torchvision's Swin-T (windowed attention, 28M parameters), 1000 classes."""
    from torchvision.models import swin_t

    return swin_t(weights=None)
