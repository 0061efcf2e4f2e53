"""Measuring one trial in this process: build, eager baseline, compile, time, memory, health,
accuracy. Imports torch, never pandas or Ray; `python -m sweeper.measure` runs one trial."""

SPAWN_TIME_ENV = "SWEEPER_SPAWN_TIME"
"""Wall-clock time (time.time()) at which the runner started the measuring process."""
