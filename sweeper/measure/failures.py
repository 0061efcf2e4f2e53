"""How a trial fails: the status a measuring process's exception becomes (oom, compile_error,
runtime_error) and its error text, as the row keeps them."""

from __future__ import annotations

import torch

_OOM_TEXT = ("out of memory", "can't allocate memory")  # CUDA/HIP; torch's CPU allocator


class TrialFailed(Exception):
    """A trial that ended with `status` (not ok) and `error`: a row, not a crash of the sweep."""

    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status, self.error = status, error


ERROR_CHARS = 4000
"""The most characters of an error's text a row keeps."""


def describe(exc: BaseException) -> str:
    """The exception's type and text, cut to ERROR_CHARS."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + " [...]"


def is_oom(exc: BaseException) -> bool:
    """The exception, or one it was raised from, is an allocator's out-of-memory error."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)) or any(m in str(e).lower() for m in _OOM_TEXT):
            return True
        e = e.__cause__ or e.__context__ or getattr(e, "inner_exception", None)
    return False


def classify(exc: BaseException, stage: str) -> TrialFailed:
    """The row's failure for an exception raised in `stage` ("compile", or any other: run)."""
    if is_oom(exc):
        return TrialFailed("oom", describe(exc))
    return TrialFailed("compile_error" if stage == "compile" else "runtime_error", describe(exc))
