"""transformers models built from their configs (random weights, nothing downloaded).

Batches carry an attention mask, so padded batches (bucketing) give the same answers on
their real tokens. Losses are computed here from the logits, so inference and training
feed the model identical inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import transformers as tf
from torch import nn

from sweeper.zoo.bundle import Batch, Bundle, output_tensor

_FIRST_ID = 3  # keep random ids clear of pad/bos/eos in every vocabulary used here


def token_batch(vocab: int, lengths: Sequence[int], pad_to: int, gen: torch.Generator,
                kind: str, num_labels: int = 2) -> Batch:
    """Random ids for sequences of `lengths`, right-padded to `pad_to` with a mask."""
    b = len(lengths)
    ids = torch.randint(_FIRST_ID, vocab, (b, pad_to), generator=gen)
    mask = torch.zeros(b, pad_to, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    ids = ids * mask  # padding id 0
    kwargs: dict[str, torch.Tensor] = {"input_ids": ids, "attention_mask": mask}
    if kind == "cls":
        labels = torch.randint(0, num_labels, (b,), generator=gen)
    else:
        labels = ids.masked_fill(mask == 0, -100)
    if kind == "seq2seq":
        kwargs["decoder_input_ids"] = torch.cat([torch.zeros(b, 1, dtype=torch.long), ids[:, :-1]], 1)
    return Batch(kwargs=kwargs, items=b, tokens=int(mask.sum()), labels=labels)


def _cls_loss(out, batch: Batch) -> torch.Tensor:
    return nn.functional.cross_entropy(output_tensor(out).float(), batch.labels)


def _clm_loss(out, batch: Batch) -> torch.Tensor:
    logits = output_tensor(out)[:, :-1].float()
    target = batch.labels[:, 1:]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                       ignore_index=-100)


def _s2s_loss(out, batch: Batch) -> torch.Tensor:
    logits = output_tensor(out).float()
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       batch.labels.reshape(-1), ignore_index=-100)


_LOSS = {"cls": _cls_loss, "clm": _clm_loss, "seq2seq": _s2s_loss, "mlm": _s2s_loss}
"""Losses by token kind: a class, the next token, teacher forcing, every real token (masked LM)."""


def hf_token_bundle(model: nn.Module, vocab: int, kind: str, num_labels: int = 2) -> Bundle:
    """A transformers model fed token batches of `kind` (cls, clm, seq2seq, mlm), fixed or padded."""
    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        n = seq_len or 128
        return token_batch(vocab, [n] * batch_size, n, gen, kind, num_labels)

    def make_padded(lengths: Sequence[int], pad_to: int, gen: torch.Generator) -> Batch:
        return token_batch(vocab, lengths, pad_to, gen, kind, num_labels)

    model.config.use_cache = False  # no KV cache: a forward pass is the unit measured
    return Bundle(model, make, _LOSS[kind], make_padded=make_padded)


_bundle = hf_token_bundle


def bert_base(**kw) -> Bundle:
    cfg = tf.BertConfig(**kw)
    return _bundle(tf.BertForSequenceClassification(cfg), cfg.vocab_size, "cls")


def distilbert(**kw) -> Bundle:
    cfg = tf.DistilBertConfig(**kw)
    return _bundle(tf.DistilBertForSequenceClassification(cfg), cfg.vocab_size, "cls")


def roberta_base(**kw) -> Bundle:
    kw = {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1,
          "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, **kw}
    cfg = tf.RobertaConfig(**kw)
    return _bundle(tf.RobertaForSequenceClassification(cfg), cfg.vocab_size, "cls")


def gpt2(**kw) -> Bundle:
    cfg = tf.GPT2Config(**kw)
    return _bundle(tf.GPT2LMHeadModel(cfg), cfg.vocab_size, "clm")


def t5_small(**kw) -> Bundle:
    cfg = tf.T5Config(**kw)
    return _bundle(tf.T5ForConditionalGeneration(cfg), cfg.vocab_size, "seq2seq")


_TINY = {"vocab_size": 1024}


def bert_tiny(**kw) -> Bundle:
    return bert_base(**{**_TINY, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "intermediate_size": 128, **kw})


def gpt2_tiny(**kw) -> Bundle:
    return gpt2(**{**_TINY, "n_embd": 64, "n_layer": 2, "n_head": 2, **kw})


def t5_tiny(**kw) -> Bundle:
    return t5_small(**{**_TINY, "d_model": 64, "d_ff": 128, "d_kv": 32, "num_layers": 2,
                       "num_decoder_layers": 2, "num_heads": 2, **kw})
