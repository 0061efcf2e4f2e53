"""Sequence bucketing policies: which padded length a batch of variable-length sequences gets.

Policies (the `axes.bucketing` strings):

- ``none``: pad each batch to its own longest sequence (one shape per distinct batch maximum).
- ``multiple:N``: round the batch maximum up to a multiple of N.
- ``pow2``: round up to the next power of two.
- ``list:64,128,256``: the smallest listed bucket that fits; a longer batch is padded to the next
  multiple of the largest bucket, so the number of shapes stays bounded.
- ``quantile:K``: K buckets at the quantiles of the stream's batch maxima (each an observed
  length; repeated quantiles merge, so there may be fewer than K).

Every padded length is capped at the model's position limit (never below the batch's own
maximum). Pure functions, no torch: `sweeper validate` checks the syntax instantly."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Policy:
    kind: str
    value: int | None = None
    """N of multiple:N, K of quantile:K."""
    buckets: tuple[int, ...] = ()
    """Ascending bucket lengths of list:..."""


def _positive_int(text: str, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{what} must be a positive integer (got {text!r})") from None
    if n <= 0:
        raise ValueError(f"{what} must be a positive integer (got {text!r})")
    return n


def parse(text: str) -> Policy:
    """Parse a policy string; ValueError with a one-line reason when it is malformed."""
    kind, sep, arg = text.strip().partition(":")
    if kind in ("none", "pow2"):
        if sep:
            raise ValueError(f"bucketing {text!r}: {kind!r} takes no argument")
        return Policy(kind)
    if kind in ("multiple", "quantile"):
        if not arg:
            what = "N (pad to multiples of N)" if kind == "multiple" else "K (number of buckets)"
            raise ValueError(f"bucketing {text!r}: write {kind}:{what[0]}, {what}")
        return Policy(kind, value=_positive_int(arg, f"bucketing {text!r}: {'N' if kind == 'multiple' else 'K'}"))
    if kind == "list":
        items = [a.strip() for a in arg.split(",") if a.strip()]
        if not items:
            raise ValueError(f"bucketing {text!r}: write list:64,128,256 (bucket lengths)")
        buckets = [_positive_int(a, f"bucketing {text!r}: bucket") for a in items]
        if buckets != sorted(set(buckets)):
            raise ValueError(f"bucketing {text!r}: buckets must be strictly increasing")
        return Policy(kind, buckets=tuple(buckets))
    raise ValueError(f"unknown bucketing {text!r}; valid: none, multiple:N, pow2, list:A,B,..., quantile:K")


def quantile_buckets(batch_maxima: Sequence[int], k: int) -> tuple[int, ...]:
    """K buckets at the 1/K, 2/K, ..., 1 quantiles of the batch maxima, each an observed length."""
    if not len(batch_maxima):
        return ()
    qs = [(i + 1) / k for i in range(k)]
    values = np.quantile(np.asarray(batch_maxima, dtype=np.int64), qs, method="inverted_cdf")
    return tuple(sorted({int(v) for v in values}))


def pad_length(n: int, policy: Policy, buckets: Sequence[int] = (), cap: int | None = None) -> int:
    """Padded length for a batch whose longest sequence has `n` tokens.

    `buckets` are the resolved buckets of list/quantile policies; `cap` the model's
    position limit (the result is min(bucket, cap), but never below n).
    """
    if n <= 0:
        raise ValueError(f"batch length must be positive (got {n})")
    if policy.kind == "none":
        padded = n
    elif policy.kind == "multiple":
        padded = math.ceil(n / policy.value) * policy.value
    elif policy.kind == "pow2":
        padded = 1 << (n - 1).bit_length()
    else:
        padded = _from_buckets(n, buckets or policy.buckets)
    return max(n, min(padded, cap)) if cap else padded


def _from_buckets(n: int, buckets: Sequence[int]) -> int:
    for b in buckets:
        if b >= n:
            return b
    if not buckets:
        return n
    top = buckets[-1]
    return math.ceil(n / top) * top


def plan(batch_maxima: Sequence[int], text: str, cap: int | None = None) -> list[int]:
    """The padded length of every batch of a stream under policy `text`."""
    policy = parse(text)
    buckets: Sequence[int] = policy.buckets
    if policy.kind == "quantile":
        buckets = quantile_buckets(batch_maxima, policy.value)
    return [pad_length(n, policy, buckets, cap) for n in batch_maxima]
