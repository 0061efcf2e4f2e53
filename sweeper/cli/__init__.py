"""Command line: sweeper run / validate / models / report / recommend."""

from sweeper.cli.app import main

__all__ = ["main"]
