"""The Python API: `sweeper.sweep` runs a sweep and returns its `Results`, `sweeper.load` reads
finished ones. The CLI is a thin layer over it (argparse, exit codes, one-line errors)."""

from sweeper import SweeperError
from sweeper.api.results import Results, load
from sweeper.api.run import RunOptions, SweepInterrupted, sweep

__all__ = ["Results", "RunOptions", "SweepInterrupted", "SweeperError", "load", "sweep"]
