"""The Tune options of `sweeper run` that are checked before Ray starts: where Tune keeps its
records (--storage) and which logger callbacks it feeds (--callback). No Ray here."""

from __future__ import annotations

import importlib.util

from sweeper.run.state import SweepError

CALLBACKS = {"wandb": ("wandb", "ray.air.integrations.wandb", "WandbLoggerCallback"),
             "mlflow": ("mlflow", "ray.air.integrations.mlflow", "MLflowLoggerCallback")}


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
