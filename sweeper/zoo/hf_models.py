"""Hugging Face models by model type (`hf:<model_type>`), from a config with the spec's overrides
(`AutoConfig.for_model(model_type, **kwargs)`) and the task's AutoModelFor... class, random
weights, nothing downloaded. Token batches carry an attention mask (right padding); the training
loss follows the task, computed here from the logits as the zoo's NLP models do."""

from __future__ import annotations

import difflib
from typing import Any

import torch
import transformers as tf

from sweeper.zoo.bundle import Batch, Bundle, xent_loss
from sweeper.zoo.nlp import hf_token_bundle

AUTO_CLASSES = {"causal-lm": "AutoModelForCausalLM", "masked-lm": "AutoModelForMaskedLM",
                "seq-cls": "AutoModelForSequenceClassification", "seq2seq": "AutoModelForSeq2SeqLM",
                "image-cls": "AutoModelForImageClassification"}
"""Each task's transformers class (the same keys as sweeper.zoo.sources.HF_TASKS)."""
TOKEN_KINDS = {"causal-lm": "clm", "masked-lm": "mlm", "seq-cls": "cls", "seq2seq": "seq2seq"}
"""Each token task's labels and loss (sweeper.zoo.nlp): next token, every token, a class, teacher forcing."""


def config_for(model_type: str, **overrides: Any) -> Any:
    """AutoConfig.for_model, with an unknown model type said in one line."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type not in CONFIG_MAPPING_NAMES:
        near = difflib.get_close_matches(model_type, list(CONFIG_MAPPING_NAMES), n=3)
        hint = f" (close: {', '.join(near)})" if near else ""
        raise ValueError(f"transformers has no model type {model_type!r}{hint}")
    return tf.AutoConfig.for_model(model_type, **overrides)


def build(model_type: str, task: str | None, **overrides: Any) -> Bundle:
    """The `task` model of `model_type`'s architecture with random weights, and its batches."""
    if task not in AUTO_CLASSES:
        raise ValueError(f"hf:{model_type}: task {task!r} is not one of {', '.join(AUTO_CLASSES)}")
    cfg = config_for(model_type, **overrides)
    if task == "seq-cls" and cfg.pad_token_id is None:
        cfg.pad_token_id = 0  # batches pad with id 0; the classifier finds each sequence's last real token
    auto = getattr(tf, AUTO_CLASSES[task])
    try:
        model = auto.from_config(cfg)
    except ValueError as e:  # a model type without this task's head
        raise ValueError(f"hf:{model_type}: no {task} model ({' '.join(str(e).split())[:200]})") from None
    if task == "image-cls":
        return _image_bundle(model, cfg)
    return hf_token_bundle(model, cfg.vocab_size, TOKEN_KINDS[task], num_labels=cfg.num_labels)


def _image_bundle(model: Any, cfg: Any) -> Bundle:
    size = cfg.image_size if isinstance(cfg.image_size, (list, tuple)) else (cfg.image_size, cfg.image_size)
    channels, num_labels = getattr(cfg, "num_channels", 3), cfg.num_labels

    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        x = torch.randn(batch_size, channels, *size, generator=gen)
        y = torch.randint(0, num_labels, (batch_size,), generator=gen)
        return Batch(kwargs={"pixel_values": x}, items=batch_size, labels=y)

    return Bundle(model, make, xent_loss)
