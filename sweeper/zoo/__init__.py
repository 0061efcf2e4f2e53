"""Model registry: exact names -> builders. Importing this module does not import torch.

Every model is built from its architecture definition with random weights: nothing is
downloaded. Tiny variants (`*-tiny`) exist so that CPU tests and smoke sweeps finish fast.
Beside the zoo, `timm:NAME` and `hf:MODEL_TYPE` name any timm or transformers architecture, and
a factory or an in-memory callable any model of the user's: sweeper.zoo.sources builds them all.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE_PREFIXES = ("timm", "hf")
"""`PREFIX:name` names a model of that library."""
HF_TASKS: dict[str, str] = {"causal-lm": "nlp", "masked-lm": "nlp", "seq-cls": "nlp", "seq2seq": "nlp",
                            "image-cls": "vision"}
"""The tasks of an `hf:` model, each with its input task (nlp: token batches; vision: images)."""


def source_of(name: str, factory: str | None = None, by_value: str | None = None) -> str:
    """Where a model comes from: zoo, timm, hf, factory or callable (sweeper.zoo.sources builds each)."""
    if by_value is not None:
        return "callable"
    if factory is not None:
        return "factory"
    prefix, sep, _ = name.partition(":")
    return prefix if sep and prefix in SOURCE_PREFIXES else "zoo"


@dataclass(frozen=True)
class ZooEntry:
    task: str
    """vision or nlp: decides which inputs and which batch unit (images, sequences)."""
    builder: str
    """`module:function` inside sweeper.zoo, imported only when the model is built."""
    description: str
    max_seq_len: int | None = None
    """Longest sequence the model's position embeddings allow (NLP only)."""
    blocks: tuple[str, ...] = ()
    """Class names of the model's repeated blocks: what regional compilation compiles. Empty: the
    zoo knows no block that repeats unchanged often enough to be worth it."""


def _vision(fn: str, desc: str, *blocks: str) -> ZooEntry:
    return ZooEntry("vision", f"sweeper.zoo.vision:{fn}", desc, blocks=blocks)


def _nlp(fn: str, desc: str, max_seq_len: int | None, block: str | None, module: str = "nlp") -> ZooEntry:
    return ZooEntry("nlp", f"sweeper.zoo.{module}:{fn}", desc, max_seq_len, (block,) if block else ())


_RESNET = ("BasicBlock", "Bottleneck")


REGISTRY: dict[str, ZooEntry] = {
    "resnet18": _vision("resnet18", "torchvision ResNet-18, 224x224, 1000 classes", *_RESNET),
    "resnet50": _vision("resnet50", "torchvision ResNet-50, 224x224, 1000 classes", *_RESNET),
    "vit_b_16": _vision("vit_b_16", "torchvision ViT-B/16, 224x224, 1000 classes", "EncoderBlock"),
    "vit_tiny": _vision("vit_ti_16", "ViT-Ti/16 (torchvision VisionTransformer: hidden 192, 12 layers, 3 heads, "
                        "MLP 768), 224x224, 1000 classes", "EncoderBlock"),
    "mobilenet_v3_large": _vision("mobilenet_v3_large", "torchvision MobileNetV3-Large, 224x224"),
    "convnext_tiny": _vision("convnext_tiny", "torchvision ConvNeXt-Tiny, 224x224", "CNBlock"),
    "efficientnet_b0": _vision("efficientnet_b0", "torchvision EfficientNet-B0, 224x224"),
    "resnet18-tiny": _vision("resnet18_tiny", "ResNet-18, 10 classes, 32x32 inputs (CPU tests)", *_RESNET),
    "vit-tiny": _vision("vit_tiny", "ViT, 2 layers, width 64, 32x32 inputs (CPU tests; ViT-Ti/16 is vit_tiny)",
                        "EncoderBlock"),
    "bert-base": _nlp("bert_base", "BERT-base (12 layers, 768 wide), sequence classification", 512, "BertLayer"),
    "distilbert": _nlp("distilbert", "DistilBERT-base (6 layers), sequence classification", 512,
                       "TransformerBlock"),
    "roberta-base": _nlp("roberta_base", "RoBERTa-base (12 layers), sequence classification", 512, "RobertaLayer"),
    "gpt2": _nlp("gpt2", "GPT-2 small (12 layers, 124M), causal LM head", 1024, "GPT2Block"),
    "t5-small": _nlp("t5_small", "T5-small encoder-decoder (60M), conditional generation, teacher forcing", 4096,
                     "T5Block"),
    "bert-tiny": _nlp("bert_tiny", "BERT, 2 layers, width 64, vocab 1024 (CPU tests)", 512, "BertLayer"),
    "gpt2-tiny": _nlp("gpt2_tiny", "GPT-2, 2 layers, width 64, vocab 1024 (CPU tests)", 1024, "GPT2Block"),
    "t5-tiny": _nlp("t5_tiny", "T5, 2+2 layers, width 64, vocab 1024 (CPU tests)", 4096, "T5Block"),
    "lstm": _nlp("lstm", "LSTM text classifier: embedding 256, 2-layer LSTM 512 wide, linear head, "
                 "vocab 30522, 2 classes", None, None, "recurrent"),
    "lstm-tiny": _nlp("lstm_tiny", "LSTM classifier, 2 layers, width 32, vocab 1024 (CPU tests)", None, None,
                      "recurrent"),
}


def names() -> list[str]:
    return sorted(REGISTRY)
