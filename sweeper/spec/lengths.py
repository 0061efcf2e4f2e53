"""Input streams: length sources drawn reproducibly, and the batch plans of a stream.

Driver side (`trials.expand`): `draw_lengths` turns a spec's length source into concrete
sequence lengths. Files are read and texts tokenized there, so the workers (maybe on other
nodes) need neither the file nor the tokenizer. Worker side: `token_plan` chunks the lengths
into batches and pads each under a bucketing policy; `image_plan` cuts an epoch of images
into batches (the last one partial) at seeded resolutions. Pure: numpy, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.spec import bucketing

if TYPE_CHECKING:
    from sweeper.spec.workload import ImagesSpec, LengthsSpec

TABLE_SUFFIXES = (".parquet", ".pq", ".csv")


class WorkloadError(ValueError):
    """A length file or text that cannot be used: the message names the file."""


def _as_lengths(values: Sequence[Any], where: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise WorkloadError(f"{where}: lengths must be numbers") from None
    if arr.size == 0:
        raise WorkloadError(f"{where}: no lengths found")
    bad = ~np.isfinite(arr) | (arr < 1) | (arr != np.round(arr))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise WorkloadError(f"{where}: entry {i + 1} is {values[i]!r}, not a positive whole number")
    return arr.astype(np.int64)


def _read_table_column(path: Path, column: str | None) -> list[Any]:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    try:
        table = pcsv.read_csv(path) if path.suffix == ".csv" else pq.read_table(path)
    except Exception as e:
        raise WorkloadError(f"{path}: cannot read ({str(e).splitlines()[0]})") from None
    names = table.column_names
    if column is None:
        if len(names) != 1:
            raise WorkloadError(f"{path}: has columns {', '.join(names)}; say which with 'column'")
        column = names[0]
    if column not in names:
        raise WorkloadError(f"{path}: no column {column!r}; columns: {', '.join(names)}")
    return table.column(column).to_pylist()


def read_length_file(path: str | Path, column: str | None = None) -> np.ndarray:
    """Lengths from a Parquet/CSV column, or a text file with one integer per line."""
    p = Path(path)
    if p.suffix in TABLE_SUFFIXES:
        return _as_lengths(_read_table_column(p, column), f"{p}[{column or 'the only column'}]")
    if column is not None:
        raise WorkloadError(f"{p}: 'column' is for .parquet/.csv files; this is read as one length per line")
    try:
        lines = [s.strip() for s in p.read_text().splitlines()]
    except UnicodeDecodeError:
        raise WorkloadError(f"{p}: not a text file (one integer per line)") from None
    values: list[float] = []
    for s in lines:
        if s and not s.startswith("#"):
            try:
                values.append(float(s))
            except ValueError:
                raise WorkloadError(f"{p}: {s!r} is not a length (one integer per line)") from None
    return _as_lengths(values, str(p))


def text_lengths(path: str | Path, tokenizer_dir: str | None = None) -> np.ndarray:
    """Token counts of each non-empty line of a text file: a local tokenizer's, or whitespace words."""
    p = Path(path)
    try:
        lines = [s for s in p.read_text().splitlines() if s.strip()]
    except UnicodeDecodeError:
        raise WorkloadError(f"{p}: not a UTF-8 text file") from None
    if not lines:
        raise WorkloadError(f"{p}: no non-empty lines to tokenize")
    if tokenizer_dir is None:
        return _as_lengths([len(s.split()) for s in lines], str(p))
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    except Exception as e:
        raise WorkloadError(f"tokenizer {tokenizer_dir}: cannot load ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''})") from None
    ids = tok(lines, add_special_tokens=True, verbose=False)["input_ids"]
    return _as_lengths([max(1, len(x)) for x in ids], str(p))


def draw_lengths(src: LengthsSpec, n: int, seed: int) -> list[int]:
    """`n` sequence lengths from `src`, the same for the same seed; clipped to [min_len, max_len]."""
    rng = np.random.default_rng(seed)
    if src.kind == "fixed":
        return [src.length] * n
    if src.kind == "uniform":
        raw = rng.integers(src.min_len, src.max_len + 1, size=n)
    elif src.kind == "normal":
        raw = np.rint(rng.normal(src.mean, src.std, size=n))
    elif src.kind == "lognormal":
        raw = np.rint(rng.lognormal(src.mu, src.sigma, size=n))
    else:
        pop = (read_length_file(src.path, src.column) if src.kind == "file"
               else text_lengths(src.path, src.tokenizer))
        raw = np.resize(pop, n) if src.order == "replay" else rng.choice(pop, size=n, replace=True)
    hi = src.max_len if src.max_len is not None else np.iinfo(np.int64).max
    return [int(x) for x in np.clip(raw, src.min_len, hi)]


def _clip_text(src: LengthsSpec) -> str:
    if src.max_len is None:
        return f", at least {src.min_len}" if src.min_len > 1 else ""
    return f" clipped to [{src.min_len}, {src.max_len}]"


def describe(src: LengthsSpec) -> str:
    """One line naming the length source and its parameters (the `length_source` column)."""
    if src.kind == "fixed":
        return f"fixed({src.length})"
    if src.kind == "uniform":
        return f"uniform[{src.min_len}, {src.max_len}]"
    if src.kind == "normal":
        return f"normal(mean={src.mean:g}, std={src.std:g}){_clip_text(src)}"
    if src.kind == "lognormal":
        return f"lognormal(mu={src.mu:g}, sigma={src.sigma:g}; median {np.exp(src.mu):.0f}){_clip_text(src)}"
    order = ("replayed in order" if src.order == "replay" else "sampled") + ("," if _clip_text(src) else "")
    if src.kind == "file":
        col = f" column {src.column}" if src.column else ""
        return f"file {src.path}{col}, {order}{_clip_text(src)}"
    tok = f"tokenizer {src.tokenizer}" if src.tokenizer else "whitespace words"
    return f"text {src.path} ({tok}), {order}{_clip_text(src)}"


def describe_images(images: ImagesSpec) -> str:
    sizes = "/".join(str(r) for r in images.resolutions) if images.resolutions else "the model's size"
    return f"epoch of {images.dataset_size} images at {sizes}"


def image_plan(images: ImagesSpec, batch_size: int, seed: int) -> list[list[int | None]]:
    """[items, resolution] per batch for one epoch; the last batch partial; None = the model's size."""
    full, rest = divmod(images.dataset_size, batch_size)
    items = [batch_size] * full + ([rest] if rest else [])
    if not images.resolutions:
        return [[n, None] for n in items]
    rng = np.random.default_rng(seed)
    sizes = rng.choice(np.asarray(images.resolutions), size=len(items))
    return [[n, int(s)] for n, s in zip(items, sizes, strict=True)]


def token_plan(lengths: Sequence[int], batch_size: int, policy: str,
               cap: int | None = None) -> list[tuple[list[int], int]]:
    """(sequence lengths, padded length) per batch: consecutive chunks of `batch_size` lengths."""
    chunks = [list(lengths[i:i + batch_size]) for i in range(0, len(lengths), batch_size)]
    pads = bucketing.plan([max(c) for c in chunks], policy, cap)
    return list(zip(chunks, pads, strict=True))


def pad_waste(real_tokens: int | None, computed_tokens: int) -> float | None:
    """Padding tokens / all tokens computed (padding included) over a stream: the row's `pad_waste`.
    None when no token was computed or the real ones are unknown (an image stream)."""
    if real_tokens is None or computed_tokens <= 0:
        return None
    return 1.0 - real_tokens / computed_tokens
