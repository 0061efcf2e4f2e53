"""Expand a SweepSpec into concrete Trials with stable ids; drop impossible combinations."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sweeper import zoo
from sweeper.spec import ModelSpec, SweepSpec


@dataclass(frozen=True)
class Trial:
    """One measurement: a model under one setting of every axis. JSON round-trips."""

    trial_id: str
    model: dict[str, Any]
    """The ModelSpec as a dict (name, factory, kwargs, input)."""
    task: str
    mode: str
    dynamic: bool | None
    batch_size: int
    seq_len: int | None
    phase: str
    precision: str
    measure: dict[str, Any] = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        return self.model["name"]

    @property
    def label(self) -> str:
        seq = f" seq{self.seq_len}" if self.seq_len else ""
        dyn = "" if self.mode == "eager" else f" dynamic={self.dynamic}"
        return f"{self.model_name} {self.mode}{dyn} bs{self.batch_size}{seq} {self.phase} {self.precision}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trial:
        return cls(**d)


@dataclass(frozen=True)
class Dropped:
    config: str
    reason: str


def trial_id(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _seq_lens(model: ModelSpec, task: str, spec: SweepSpec) -> list[int | None]:
    if task == "nlp":
        return list(spec.axes.seq_len)
    return [None]


def _drop_reason(model: ModelSpec, mode: str, seq_len: int | None, spec: SweepSpec) -> str | None:
    backend = spec.measure.backend
    if backend != "inductor" and mode not in ("eager", "default"):
        return f"mode {mode!r} needs the inductor backend (backend is {backend!r})"
    entry = zoo.REGISTRY.get(model.name) if model.factory is None else None
    if entry and entry.max_seq_len and seq_len and seq_len > entry.max_seq_len:
        return f"seq_len {seq_len} exceeds {model.name}'s {entry.max_seq_len} positions"
    return None


def expand(spec: SweepSpec) -> tuple[list[Trial], list[Dropped]]:
    """Every combination of the axes, per model, in a stable order."""
    a = spec.axes
    measure = spec.measure.model_dump(mode="json")
    trials: dict[str, Trial] = {}
    dropped: list[Dropped] = []
    for model in spec.models:
        task = model.task
        mdict = model.model_dump(mode="json")
        grid = itertools.product(a.phase, a.precision, a.batch_size, _seq_lens(model, task, spec),
                                 a.mode, a.dynamic)
        for phase, precision, bs, seq_len, mode, dynamic in grid:
            if mode == "eager":
                dynamic = None  # no compile, so no dynamic flag: one eager trial per setting
            reason = _drop_reason(model, mode, seq_len, spec)
            config = {"model": mdict, "task": task, "mode": mode, "dynamic": dynamic,
                      "batch_size": bs, "seq_len": seq_len, "phase": phase,
                      "precision": precision, "measure": measure}
            if reason:
                dropped.append(Dropped(f"{model.name} {mode} bs{bs} seq{seq_len}", reason))
                continue
            tid = trial_id(config)
            trials.setdefault(tid, Trial(trial_id=tid, **config))
    return list(trials.values()), _dedupe(dropped)


def _dedupe(dropped: list[Dropped]) -> list[Dropped]:
    seen: dict[tuple[str, str], Dropped] = {}
    for d in dropped:
        seen.setdefault((d.config, d.reason), d)
    return list(seen.values())
