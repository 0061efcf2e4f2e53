"""sweeper: should I torch.compile this model on these GPUs, and with which settings?

    import sweeper
    res = sweeper.sweep("experiments/smoke.yaml")      # or a dict, with models given in memory
    res.recommend()                                     # what `sweeper recommend --json` answers

`sweep`, `load` and `Results` come from sweeper.api, imported on first use: importing the package
imports nothing else (the measuring processes import it too).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Results", "SweeperError", "__version__", "load", "sweep"]


class SweeperError(ValueError):
    """A user mistake or an unusable input, said in one line: a spec, a results directory, results
    files, a question the results cannot answer. The CLI prints it as `sweeper: error: MESSAGE`
    and exits 2; the Python API raises it (each of sweeper's error classes is one)."""


def __getattr__(name: str) -> Any:
    if name in ("sweep", "load", "Results"):
        from sweeper import api

        return getattr(api, name)
    raise AttributeError(f"module 'sweeper' has no attribute {name!r}")
