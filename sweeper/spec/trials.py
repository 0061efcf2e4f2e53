"""Expand a SweepSpec into concrete Trials with stable ids; drop impossible combinations."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pydantic import ValidationError

from sweeper import zoo
from sweeper.results.schema import CONFIG_COLUMNS, CUDAGRAPH_MODES
from sweeper.spec import lengths
from sweeper.spec.deploy_axes import applied_options, deploy_drop_reason, option_id_keys
from sweeper.spec.sections import MeasureSpec, ModelSpec
from sweeper.spec.sweep_spec import SpecError, SweepSpec


@dataclass(frozen=True)
class DrawnStream:
    """A workload's stream as drawn on the driver: what every trial of it feeds, batch by batch."""

    name: str
    source: str
    """The length source or image plan, as text."""
    seed: int
    steady_passes: int
    lengths: list[int] | None = None
    """Token streams: one sequence length per item, in order."""
    images: list[list[int]] | None = None
    """Image streams: [items, resolution] per batch."""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Trial:
    """One measurement: a model under one setting of every axis. Travels to the measuring process
    as JSON (`to_json` / `from_json`), validated again there."""

    trial_id: str
    model: ModelSpec
    task: str
    mode: str
    dynamic: bool | None
    batch_size: int
    seq_len: int | None
    phase: str
    precision: str
    measure: MeasureSpec = field(default_factory=MeasureSpec)
    bucketing: str = "none"
    """Padding policy of a token stream (sweeper.spec.bucketing)."""
    mark_dynamic: bool = False
    """Mark the input dimensions that vary over the stream with torch._dynamo.mark_dynamic."""
    workload: DrawnStream | None = None
    """The input stream; None: one fixed-shape batch."""
    scope: str = "whole"
    """What is compiled: the whole model, or each repeated block in place (regional)."""
    new_tokens: int | None = None
    """Phase generate: tokens decoded after the prompt (None for the other phases)."""
    cache: str | None = None
    """Phase generate: the KV cache, static or dynamic (None for the other phases)."""
    option_set: str | None = None
    """The name of the spec's inductor option set this trial applies (None: the spec names none)."""
    options: dict[str, Any] = field(default_factory=dict)
    """That set's options; the measuring process merges its mode's own options under them."""
    path: str = "jit"
    """jit (torch.compile) or aoti (torch.export + AOTInductor package, loaded in a fresh process)."""
    accelerator_type: str | None = None
    """The GPU type (Ray's `accelerator_type:<NAME>` resource) this trial must run on; None: any node."""

    @property
    def model_name(self) -> str:
        return self.model.name

    @property
    def label(self) -> str:
        seq = f" seq{self.seq_len}" if self.seq_len else ""
        dyn = "" if self.mode == "eager" else f" dynamic={self.dynamic}"
        dyn += " regional" if self.scope == "regional" else ""
        dyn += f" options={self.option_set}" if self.option_set is not None else ""
        dyn += " aoti" if self.path == "aoti" else ""
        if self.workload is not None:
            mark = " mark_dynamic" if self.mark_dynamic else ""
            buck = f" bucketing={self.bucketing}" if self.workload.lengths is not None else ""
            seq = f" stream={self.workload.name}{buck}{mark}"
        if self.phase == "generate":
            seq += f"+{self.new_tokens} {self.cache}"
        on = f" on {self.accelerator_type}" if self.accelerator_type else ""
        return f"{self.model_name} {self.mode}{dyn} bs{self.batch_size}{seq} {self.phase} {self.precision}{on}"

    def stream_columns(self) -> dict[str, Any]:
        """The settings beyond CONFIG_COLUMNS as row columns: the stream's (fixed-shape trials: no
        workload, no bucketing), the compile scope, the option set, the path and the GPU type asked for."""
        w = self.workload
        return {"bucketing": self.bucketing, "mark_dynamic": self.mark_dynamic, "scope": self.scope,
                "option_set": self.option_set, "path": self.path,
                "workload": w.name if w else None, "length_source": w.source if w else None,
                "new_tokens": self.new_tokens, "cache": self.cache, "accelerator_type": self.accelerator_type}

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(model=self.model.model_dump(mode="json"), measure=self.measure.identity(),
                 workload=self.workload.to_dict() if self.workload else None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trial:
        """The inverse of `to_dict`; a malformed trial raises SpecError naming the field."""
        try:
            model = ModelSpec.model_validate(d["model"])
            measure = MeasureSpec.model_validate(d["measure"])
        except ValidationError as e:
            raise SpecError(f"trial {d.get('trial_id')}: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None
        workload = DrawnStream(**d["workload"]) if d.get("workload") else None
        return cls(**{**d, "model": model, "measure": measure, "workload": workload})

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Trial:
        return cls.from_dict(json.loads(text))


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


def _drop_reason(model: ModelSpec, mode: str, seq_len: int | None, spec: SweepSpec,
                 scope: str = "whole") -> str | None:
    backend = spec.measure.backend
    if scope == "regional" and model.source == "zoo" and not model.blocks:
        return (f"scope 'regional' needs a repeated block class: the zoo knows none for {model.name} "
                "(name one with the model's `block`)")
    if backend != "inductor" and mode not in ("eager", "default"):
        return f"mode {mode!r} needs the inductor backend (backend is {backend!r})"
    entry = zoo.REGISTRY.get(model.name) if model.source == "zoo" else None
    if entry and entry.max_seq_len and seq_len and seq_len > entry.max_seq_len:
        return f"seq_len {seq_len} exceeds {model.name}'s {entry.max_seq_len} positions"
    return None


def _grid(spec: SweepSpec, model: ModelSpec) -> Iterator[dict[str, Any]]:
    """Every combination for one model. Settings that cannot apply collapse to their default:
    eager has no dynamic flag, only token streams bucket, only streams mark dimensions dynamic."""
    a, task = spec.axes, model.input_task
    loads = [n for n, w in spec.workloads.items()
             if w.task == task and (w.models is None or model.name in w.models)] or [None]
    for load in loads:
        seq_lens = [None] if load else _seq_lens(model, task, spec)
        is_tokens = load is not None and task == "nlp"
        for (gpu_type, phase, precision, bs, seq_len, mode, dynamic, policy, mark, scope, decode, option_set,
             path) in itertools.product(a.accelerator_type or [None], a.phase, a.precision, a.batch_size, seq_lens,
                                        a.mode, a.dynamic, a.bucketing, a.mark_dynamic, a.scope,
                                        _decode_settings(spec), list(a.options or [None]), a.path):
            if mode == "eager":  # no compile: one eager trial per setting
                dynamic, scope, option_set, path = None, "whole", None, "jit"
            elif path == "aoti" and dynamic is None:  # an export is of fixed shapes: one aoti trial
                dynamic = False
            new_tokens, cache = decode if phase == "generate" else (None, None)
            yield {"task": task, "mode": mode, "dynamic": dynamic, "batch_size": bs, "seq_len": seq_len,
                   "phase": phase, "precision": precision, "workload": load, "scope": scope,
                   "new_tokens": new_tokens, "cache": cache, "option_set": option_set, "path": path,
                   "accelerator_type": gpu_type,
                   "bucketing": policy if is_tokens else "none",
                   "mark_dynamic": mark and load is not None and mode != "eager" and dynamic is not True}


def _decode_settings(spec: SweepSpec) -> list[tuple[int, str]]:
    """(new_tokens, cache) pairs of phase generate; the other phases collapse them to one (then None)."""
    return list(itertools.product(spec.axes.new_tokens, spec.axes.cache))


def expand(spec: SweepSpec) -> tuple[list[Trial], list[Dropped]]:
    """Every combination of the axes, per model, in a stable order."""
    # settings added after the first release enter the config (and the id) only when set
    measure = spec.measure.identity()
    trials: dict[str, Trial] = {}
    dropped: list[Dropped] = []
    streams = _DrawnStreams(spec)
    for model in spec.models:
        mdict = model.identity()
        for c in _grid(spec, model):
            stream = streams.get(c["workload"], c["batch_size"]) if c["workload"] else None
            reason = (_drop_reason(model, c["mode"], c["seq_len"], spec, c["scope"])
                      or _stream_drop_reason(model, c, stream) or generate_drop_reason(model, c)
                      or deploy_drop_reason(c, spec))
            config = {"model": mdict, **{k: c[k] for k in CONFIG_COLUMNS}, "measure": measure}
            if reason:
                where = f" {c['phase']} stream {c['workload']}" if stream else ""
                where = where or (f" seq{c['seq_len']}" if c["seq_len"] else "")
                scope = (" regional" if c["scope"] == "regional" else "") + (" aoti" if c["path"] == "aoti" else "")
                scope += f" on {c['accelerator_type']}" if c["accelerator_type"] else ""
                dropped.append(Dropped(f"{model.name} {c['mode']}{scope} bs{c['batch_size']}{where}", reason))
                continue
            if stream is not None:  # fixed-shape trials keep the ids they had before streams existed
                config.update(bucketing=c["bucketing"], mark_dynamic=c["mark_dynamic"], workload=stream)
            if c["phase"] == "generate":  # the other phases keep the ids they had before generate
                config.update(new_tokens=c["new_tokens"], cache=c["cache"])
            if c["scope"] != "whole":  # likewise, whole-model trials keep their ids
                config["scope"] = c["scope"]
            config.update(option_id_keys(c, spec.axes.options))  # and trials without options theirs
            if c["accelerator_type"] is not None:  # and trials placed anywhere keep theirs
                config["accelerator_type"] = c["accelerator_type"]
            tid = trial_id(config)
            trials.setdefault(tid, Trial(trial_id=tid, **{**config, "model": model, "measure": spec.measure,
                                                          "workload": DrawnStream(**stream) if stream else None,
                                                          **applied_options(c, spec.axes.options)}))
    return list(trials.values()), _dedupe(dropped)


GENERATE_ZOO = ("gpt2", "gpt2-tiny")
"""Zoo models with a causal-LM head that phase generate can drive."""


def generate_drop_reason(model: ModelSpec, c: dict[str, Any]) -> str | None:
    if c["phase"] != "generate":
        return None
    if c["workload"] is not None:
        return "phase generate decodes a fixed prompt batch, not a workload's stream"
    causal = model.name in GENERATE_ZOO if model.source == "zoo" else model.source != "hf" or model.task == "causal-lm"
    if not causal:
        return f"phase generate needs a causal language model ({model.name} is not one)"
    if c["mode"] in CUDAGRAPH_MODES and c["cache"] == "dynamic":
        return (f"mode {c['mode']!r} needs cache 'static' in phase generate: a dynamic cache grows by "
                "concatenating the CUDA-graph outputs that the next step overwrites")
    entry = zoo.REGISTRY.get(model.name) if model.source == "zoo" else None
    total = (c["seq_len"] or 0) + c["new_tokens"]
    if entry and entry.max_seq_len and total > entry.max_seq_len:
        return (f"prompt {c['seq_len']} + {c['new_tokens']} new tokens exceed {model.name}'s "
                f"{entry.max_seq_len} positions")
    return None


def _stream_drop_reason(model: ModelSpec, c: dict[str, Any], stream: dict[str, Any] | None) -> str | None:
    if stream is None:
        return None
    if c["phase"] != "infer":
        return "stream workloads are measured for inference only"
    entry = zoo.REGISTRY.get(model.name) if model.source == "zoo" else None
    longest = max(stream.get("lengths") or [0])
    if entry and entry.max_seq_len and longest > entry.max_seq_len:
        return (f"workload {stream['name']!r} has sequences of {longest} tokens, above {model.name}'s "
                f"{entry.max_seq_len} positions (set its max_len)")
    return None


class _DrawnStreams:
    """The driver-side draw of each workload's stream, once per batch size: the concrete lengths
    (files read, texts tokenized here) or image plan that every trial of that size carries."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self.cache: dict[tuple[str, int], dict[str, Any]] = {}

    def get(self, name: str, batch_size: int) -> dict[str, Any]:
        if (name, batch_size) not in self.cache:
            self.cache[name, batch_size] = self._draw(name, batch_size)
        return self.cache[name, batch_size]

    def _draw(self, name: str, batch_size: int) -> dict[str, Any]:
        w = self.spec.workloads[name]
        out: dict[str, Any] = {"name": name, "seed": w.seed, "steady_passes": w.steady_passes}
        if w.images is not None:
            return {**out, "source": lengths.describe_images(w.images),
                    "images": lengths.image_plan(w.images, batch_size, w.seed)}
        try:
            drawn = lengths.draw_lengths(w.lengths, w.num_batches * batch_size, w.seed)
        except (lengths.WorkloadError, OSError) as e:
            raise SpecError(f"workloads.{name}.lengths: {e}") from None
        return {**out, "source": lengths.describe(w.lengths), "lengths": drawn}


def _dedupe(dropped: list[Dropped]) -> list[Dropped]:
    seen: dict[tuple[str, str], Dropped] = {}
    for d in dropped:
        seen.setdefault((d.config, d.reason), d)
    return list(seen.values())
