"""A recurrent text classifier: token embedding, a multi-layer LSTM, a linear head on the last
real token's output. Random weights; token batches and losses as the NLP zoo models have them.

The head reads the LSTM output at each sequence's last real position (right padding), so a
padded batch (bucketing, token streams) gives the same logits as an unpadded one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sweeper.zoo.bundle import Batch, Bundle, xent_loss
from sweeper.zoo.nlp import token_batch


class LSTMClassifier(nn.Module):
    """embedding -> nn.LSTM (batch first) -> linear head on the last real position."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, num_layers: int, num_classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, num_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(input_ids))
        last = (attention_mask.sum(1) - 1).clamp(min=0)
        picked = out.gather(1, last.view(-1, 1, 1).expand(-1, 1, out.shape[-1]))
        return self.head(picked.squeeze(1))


def lstm(vocab_size: int = 30522, embed_dim: int = 256, hidden_size: int = 512, num_layers: int = 2,
         num_classes: int = 2) -> Bundle:
    model = LSTMClassifier(vocab_size, embed_dim, hidden_size, num_layers, num_classes)

    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        n = seq_len or 128
        return token_batch(vocab_size, [n] * batch_size, n, gen, "cls", num_classes)

    def make_padded(lengths: Sequence[int], pad_to: int, gen: torch.Generator) -> Batch:
        return token_batch(vocab_size, lengths, pad_to, gen, "cls", num_classes)

    return Bundle(model, make, xent_loss, make_padded=make_padded)


def lstm_tiny(**kw) -> Bundle:
    return lstm(**{"vocab_size": 1024, "embed_dim": 32, "hidden_size": 32, **kw})
