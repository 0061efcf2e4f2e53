"""The Tune options of `sweeper run` that are checked before Ray starts: where Tune keeps its
records (--storage), which of its own per-trial records it writes (--tune-logs) and which logger
callbacks it feeds (--callback). No Ray here."""

from __future__ import annotations

import importlib.util
import logging
import sys

from sweeper.run.state import SweepError

CALLBACKS = {"wandb": ("wandb", "ray.air.integrations.wandb", "WandbLoggerCallback"),
             "mlflow": ("mlflow", "ray.air.integrations.mlflow", "MLflowLoggerCallback")}


TUNE_LOGS = ("json", "csv", "tensorboard")
"""Tune's own per-trial records (result.json and params.json, progress.csv, TensorBoard events)."""


def tune_logs(value: str) -> tuple[str, ...]:
    """--tune-logs: a comma-separated subset of TUNE_LOGS, "all" or "none"; a SweepError names a
    word that is none of them."""
    words = [w.strip() for w in value.split(",") if w.strip()]
    if words == ["all"]:
        return TUNE_LOGS
    if words == ["none"]:
        return ()
    unknown = [w for w in words if w not in TUNE_LOGS]
    if unknown or not words:
        raise SweepError(f"--tune-logs {value!r}: expected all, none or a comma-separated list of "
                         f"{', '.join(TUNE_LOGS)}")
    return tuple(w for w in TUNE_LOGS if w in words)


def check_options(storage: str | None, callbacks: list[str]) -> None:
    """Refuse a --storage URI no file system serves, or a --callback whose package is missing,
    before anything starts."""
    if storage is not None:
        storage_uri(storage)
    for name in callbacks:
        package = CALLBACKS[name][0]
        if importlib.util.find_spec(package) is None:
            raise SweepError(f"--callback {name} needs the {package} package: pip install {package}")


def storage_uri(storage: str) -> str:
    """The --storage URI, if a pyarrow file system serves it; else a SweepError naming it."""
    import pyarrow.fs

    try:
        pyarrow.fs.FileSystem.from_uri(storage)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, OSError, ValueError) as e:
        raise SweepError(f"--storage {storage}: {' '.join(str(e).split())[:200]}") from None
    return storage


def import_tensorboardx_without_torch() -> None:
    """Tune's TensorBoard logger imports tensorboardX, whose writer tries `import torch` only to
    accept tensors (about 470 MB in a driver that never needs torch): import it first, torch hidden."""
    if "torch" in sys.modules or "tensorboardX" in sys.modules or importlib.util.find_spec("tensorboardX") is None:
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError meanwhile
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        logging.getLogger(__name__).debug("tensorboardX without torch failed; Tune imports it as usual",
                                          exc_info=True)
    finally:
        del sys.modules["torch"]
