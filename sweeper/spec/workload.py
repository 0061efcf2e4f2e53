"""The `workloads` section of a spec: input streams of variable-length token batches or of
image epochs. Validated like the rest of the spec (strict, one-line errors); no torch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from sweeper.spec.base import PositiveInt, Strict


class _Clipped(Strict):
    min_len: PositiveInt = 1
    """Shorter lengths are raised to this."""
    max_len: PositiveInt | None = None
    """Longer lengths are cut to this (truncation); None: no limit."""

    @model_validator(mode="after")
    def _order(self) -> _Clipped:
        if self.max_len is not None and self.min_len > self.max_len:
            raise ValueError(f"min_len {self.min_len} is above max_len {self.max_len}")
        return self


class FixedLengths(Strict):
    kind: Literal["fixed"]
    """Every sequence has the same length."""
    length: PositiveInt
    """That length, in tokens."""


class UniformLengths(_Clipped):
    kind: Literal["uniform"]
    """Lengths drawn uniformly from min_len to max_len."""
    min_len: PositiveInt
    """Shortest length drawn."""
    max_len: PositiveInt
    """Longest length drawn."""


class NormalLengths(_Clipped):
    kind: Literal["normal"]
    """Lengths drawn from a normal distribution, rounded, clipped to [min_len, max_len]."""
    mean: Annotated[float, Field(gt=0)]
    """Mean length, in tokens."""
    std: Annotated[float, Field(ge=0)]
    """Standard deviation, in tokens."""
    max_len: PositiveInt
    """Longer lengths are cut to this (required: the tail is unbounded)."""


class LogNormalLengths(_Clipped):
    kind: Literal["lognormal"]
    """Lengths drawn from a log-normal distribution, rounded, clipped to [min_len, max_len]."""
    mu: float
    """Mean of the underlying normal: ln(median length), e.g. ln(180) = 5.193."""
    sigma: Annotated[float, Field(ge=0)]
    """Standard deviation of the underlying normal."""
    max_len: PositiveInt
    """Longer lengths are cut to this (required: the tail is unbounded)."""


def _existing_file(v: str) -> str:
    if not Path(v).is_file():
        raise ValueError(f"no such file {v!r} (relative paths start at the working directory)")
    return v


class _FromFile(_Clipped):
    path: str
    """The file, relative to the working directory; read on the driver, so workers need no copy."""
    order: Literal["sample", "replay"] = "sample"
    """sample: draw with replacement (seeded); replay: take the lengths in file order, cycling."""

    _file = field_validator("path")(classmethod(lambda cls, v: _existing_file(v)))


class FileLengths(_FromFile):
    """`path`: one length per line, or a .parquet/.csv file (then `column`)."""

    kind: Literal["file"]
    """Lengths read from a file."""
    column: str | None = None
    """The column of a .parquet or .csv file that holds the lengths."""


class TextLengths(_FromFile):
    """`path`: a UTF-8 text file; each non-empty line is one sequence."""

    kind: Literal["text"]
    """Lengths of a text file's lines, counted in tokens (or words)."""
    tokenizer: str | None = None
    """Local directory for transformers.AutoTokenizer (no download); None: whitespace words."""

    @field_validator("tokenizer")
    @classmethod
    def _tok_dir(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).is_dir():
            raise ValueError(f"no tokenizer directory {v!r} (a local directory; nothing is downloaded)")
        return v


LengthsSpec = Annotated[FixedLengths | UniformLengths | NormalLengths | LogNormalLengths | FileLengths
                        | TextLengths, Field(discriminator="kind")]


class ImagesSpec(Strict):
    dataset_size: PositiveInt
    """Images in one epoch; when batch_size does not divide it, the last batch is partial."""
    resolutions: list[PositiveInt] = Field(default_factory=list)
    """Image sizes, one drawn per batch (seeded); empty: the model's own size."""


class WorkloadSpec(Strict):
    """A stream of batches instead of one fixed shape: token lengths (NLP) or an image epoch (vision)."""

    lengths: LengthsSpec | None = None
    """Where sequence lengths come from; the stream applies to NLP models."""
    images: ImagesSpec | None = None
    """An epoch of images; the stream applies to vision models."""
    num_batches: PositiveInt = 64
    """Batches in a token stream (an image stream is one epoch)."""
    seed: int = 0
    """Seeds the lengths (or resolutions) and the token ids: the same stream for every trial."""
    steady_passes: PositiveInt = 3
    """Passes over the stream after the first one; steady throughput is their median."""
    models: list[str] | None = None
    """Names of the spec's models that run this stream; None: every model of its task."""

    @model_validator(mode="after")
    def _one_kind(self) -> WorkloadSpec:
        if (self.lengths is None) == (self.images is None):
            raise ValueError("give exactly one of 'lengths' (token streams) or 'images' (image epochs)")
        if self.images is not None and "num_batches" in self.model_fields_set:
            raise ValueError("'num_batches' is for token streams; an image stream is one epoch of dataset_size")
        return self

    @property
    def task(self) -> str:
        return "nlp" if self.lengths is not None else "vision"

