"""The experiment schema: load a YAML sweep spec, validate every field, fail in one line.

Nothing here imports torch or Ray, so `sweeper validate` is instant and a bad spec is
refused before anything starts.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from sweeper import zoo
from sweeper.spec import bucketing
from sweeper.spec.search import SearchSpec
from sweeper.spec.workload import WorkloadSpec

Mode = Literal["eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
MODES: tuple[str, ...] = Mode.__args__  # type: ignore[attr-defined]
Phase = Literal["infer", "train"]
Precision = Literal["fp32", "bf16"]
PositiveInt = Annotated[int, Field(gt=0)]

_FACTORY_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class SpecError(ValueError):
    """A user mistake in a spec: the message is one line naming the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputSpec(_Strict):
    """How to build inputs for a user model that returns a plain `nn.Module`."""

    kind: Literal["image", "tokens", "tensor"]
    """image: (B, channels, size, size) floats; tokens: (B, seq_len) ids; tensor: (B, *shape) floats."""
    channels: PositiveInt = 3
    size: PositiveInt = 224
    vocab_size: PositiveInt = 30522
    shape: list[PositiveInt] = Field(default_factory=list)
    num_classes: PositiveInt | None = None
    """Classes for the training loss (cross-entropy on random labels); None: mean-square loss."""

    @model_validator(mode="after")
    def _shape_for_tensor(self) -> InputSpec:
        if self.kind == "tensor" and not self.shape:
            raise ValueError("kind 'tensor' needs 'shape' (the per-sample shape, batch excluded)")
        return self


class ModelSpec(_Strict):
    """One model: a zoo name, or the user's own `package.module:factory`."""

    name: str
    """A zoo name (see `sweeper models`), or a label for a factory model."""
    factory: str | None = None
    """`package.module:callable` returning an nn.Module or a sweeper.zoo.Bundle. Runs that code."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the factory (or overrides for a zoo model's builder)."""
    input: InputSpec | None = None
    """Inputs for a factory that returns a plain nn.Module."""

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a valid model name (letters, digits, '_', '.', '-')")
        return v

    @field_validator("factory")
    @classmethod
    def _factory_ok(cls, v: str | None) -> str | None:
        if v is not None and not _FACTORY_RE.match(v):
            raise ValueError(f"{v!r} is not of the form 'package.module:callable'")
        return v

    @model_validator(mode="after")
    def _known(self) -> ModelSpec:
        if self.factory is None:
            if self.name not in zoo.REGISTRY:
                raise ValueError(f"unknown model {self.name!r}; valid: {', '.join(zoo.names())}")
            if self.input is not None:
                raise ValueError("'input' is only for factory models; zoo models build their own")
        return self

    @property
    def task(self) -> str:
        if self.factory is None:
            return zoo.REGISTRY[self.name].task
        if self.input is not None and self.input.kind == "tokens":
            return "nlp"
        return "vision" if self.input is not None and self.input.kind == "image" else "custom"


def _no_dupes(v: list[Any]) -> list[Any]:
    if not v:
        raise ValueError("must list at least one value")
    seen = [json.dumps(x) for x in v]
    dupes = sorted({s for s in seen if seen.count(s) > 1})
    if dupes:
        raise ValueError(f"duplicate values {', '.join(dupes)}")
    return v


class Axes(_Strict):
    """The grid: every combination becomes one trial (impossible ones are dropped, with a reason)."""

    mode: list[Mode] = Field(default_factory=lambda: ["eager", "default"])
    dynamic: list[bool | None] = Field(default_factory=lambda: [None])
    """torch.compile(dynamic=...): null is automatic dynamic (recompile once as dynamic)."""
    batch_size: list[PositiveInt] = Field(default_factory=lambda: [8])
    seq_len: list[PositiveInt] = Field(default_factory=lambda: [128])
    """Sequence length for NLP models (tokens); ignored for vision models."""
    phase: list[Phase] = Field(default_factory=lambda: ["infer"])
    precision: list[Precision] = Field(default_factory=lambda: ["fp32"])
    """fp32, or bf16 through torch.autocast."""
    bucketing: list[str] = Field(default_factory=lambda: ["none"])
    """Padded length of each batch of a token stream: none, multiple:N, pow2, list:A,B,..., quantile:K."""
    mark_dynamic: list[bool] = Field(default_factory=lambda: [False])
    """torch._dynamo.mark_dynamic on every input dimension that varies over a workload's stream."""

    _check = field_validator("mode", "dynamic", "batch_size", "seq_len", "phase", "precision",
                             "bucketing", "mark_dynamic")(
        classmethod(lambda cls, v: _no_dupes(v))
    )

    @field_validator("bucketing")
    @classmethod
    def _policies(cls, v: list[str]) -> list[str]:
        for text in v:
            bucketing.parse(text)
        return v


class MeasureSpec(_Strict):
    """How each trial is timed; the defaults follow the README's metric definitions."""

    warmup_iters: PositiveInt = 3
    """Steady iterations after the first (compiling) call, before timing."""
    windows: Annotated[int, Field(ge=5)] = 10
    """Timed windows per arm; throughput is the median over windows, and the speedup's interval
    resamples the pairs of alternated eager and compiled windows."""
    min_window_iters: PositiveInt = 5
    min_window_s: Annotated[float, Field(gt=0)] = 0.1
    """Each window runs until both the iteration floor and the time floor are met."""
    trial_timeout_s: Annotated[float, Field(gt=0)] = 1800.0
    """Wall-clock limit per trial process; a hung compile or run is killed with its children."""
    backend: Literal["inductor", "aot_eager", "eager"] = "inductor"
    """torch.compile backend; aot_eager/eager are for plumbing checks, not for answers."""
    matmul_precision: Literal["highest", "high", "medium"] = "high"
    """torch.set_float32_matmul_precision for every trial (recorded in every row)."""
    accuracy_tol: Annotated[float, Field(gt=0)] | None = None
    """Tolerance of the accuracy check; None: by precision (see README). With a float64 reference
    a tenth of it is the floor of the allowed error; without one, the bound vs eager."""
    warm_compile: bool = True
    """Also measure compile time in a second process whose cache holds the trial's artifacts."""
    recompile_limit: PositiveInt | None = None
    """torch._dynamo recompile limit; None keeps torch's default."""
    compile_threads: PositiveInt | None = None
    """Inductor compile workers per trial (TORCHINDUCTOR_COMPILE_THREADS). None keeps torch's
    default, one per core of the host (up to 32): trials that share a host then compete for its cores,
    and a compiling trial disturbs its neighbour's launch-bound timings."""
    seed: int = 0
    memory_cap_gib: Annotated[float, Field(gt=0)] | None = None
    """Cap the caching allocator at this many GiB per trial (as on a smaller GPU); None: no cap."""

    def identity(self) -> dict[str, Any]:
        """The settings as they enter a trial's id: a setting added after the first release enters
        only when it is set, so the ids of specs that leave it out stay as they were."""
        later = {k for k in _LATER_MEASURE_SETTINGS if getattr(self, k) is None}
        return self.model_dump(mode="json", exclude=later)


_LATER_MEASURE_SETTINGS = ("compile_threads", "memory_cap_gib")


class Resources(_Strict):
    device: Literal["auto", "cuda", "cpu"] = "auto"
    """auto: cuda when the cluster has GPUs, else cpu."""
    gpus_per_trial: Annotated[float, Field(gt=0, le=8)] = 1.0
    """Below 1 lets trials share a GPU (their timings then disturb each other)."""
    cpus_per_trial: Annotated[int, Field(gt=0)] | None = None
    """CPUs each trial holds, pinned (whole physical cores, its own on the host): its measuring
    processes and compile workers run there only. None: on GPUs, each GPU's equal share of its
    node's CPUs; on CPU, 1 CPU for Ray's scheduling and no pinning."""
    max_concurrent_trials: PositiveInt | None = None
    max_retries: Annotated[int, Field(ge=0, le=5)] = 1
    """Retries for a trial whose worker crashed or lost its node; OOM/compile errors never retry."""

    @field_validator("gpus_per_trial")
    @classmethod
    def _gpus(cls, v: float, info: ValidationInfo) -> float:
        if v > 1 and not float(v).is_integer():
            raise ValueError(f"above 1 it must be a whole number of GPUs (got {v:g})")
        if v != 1 and info.data.get("device") == "cpu":
            raise ValueError(f"{v:g} GPUs per trial contradicts device 'cpu' (use device 'cuda' or 'auto')")
        return v


class SweepSpec(_Strict):
    name: str
    description: str = ""
    models: list[ModelSpec]
    axes: Axes = Field(default_factory=Axes)
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    resources: Resources = Field(default_factory=Resources)
    workloads: dict[str, WorkloadSpec] = Field(default_factory=dict)
    """Named input streams; each applies to every model of its task instead of the fixed seq_len grid."""
    results_dir: str | None = None
    """Where rows and the report go; default results/<name>. Relative to the working directory."""
    search: SearchSpec = Field(default_factory=SearchSpec)
    """Which settings run: the whole grid (default) or a budgeted search (sweeper.spec.search)."""

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a valid sweep name (letters, digits, '_', '.', '-')")
        return v

    @field_validator("workloads")
    @classmethod
    def _workload_names(cls, v: dict[str, WorkloadSpec]) -> dict[str, WorkloadSpec]:
        for name in v:
            if not _NAME_RE.match(name):
                raise ValueError(f"{name!r} is not a valid workload name (letters, digits, '_', '.', '-')")
        return v

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[ModelSpec]) -> list[ModelSpec]:
        if not v:
            raise ValueError("must list at least one model")
        names = [m.name for m in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate model names {', '.join(dupes)}")
        return v

    @model_validator(mode="after")
    def _stream_axes_need_streams(self) -> SweepSpec:
        tasks = {w.task for w in self.workloads.values()}
        if any(b != "none" for b in self.axes.bucketing) and "nlp" not in tasks:
            raise ValueError("axes.bucketing pads token streams: add a workload with 'lengths'")
        if True in self.axes.mark_dynamic and not tasks:
            raise ValueError("axes.mark_dynamic marks dimensions that vary over a stream: add a workload")
        tasks_by_model = {m.name: m.task for m in self.models}
        for name, w in self.workloads.items():
            for m in w.models or []:
                if tasks_by_model.get(m, w.task) != w.task:
                    raise ValueError(f"workloads.{name}.models: {m!r} is a {tasks_by_model[m]} model; "
                                     f"this stream is for {w.task} models")
                if m not in tasks_by_model:
                    raise ValueError(f"workloads.{name}.models: no model {m!r} in this spec")
        return self

    def identity(self) -> dict[str, Any]:
        """Everything that changes what a trial measures (not its description, output place, or
        which settings a search picks: a row measured under any search is the same row)."""
        return self.model_dump(mode="json", exclude={"description", "results_dir", "search"})

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:16]


def _format_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown key (allowed: {', '.join(_allowed_keys(e['loc']))})"
        elif e["type"] == "literal_error":
            msg = f"{msg} (got {e['input']!r})"
        elif e["type"] in ("greater_than", "greater_than_equal", "less_than_equal", "int_parsing",
                           "int_type", "float_parsing", "bool_parsing", "list_type", "string_type",
                           "model_type", "dict_type"):
            msg = f"{msg} (got {e['input']!r})"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys of the section that holds an unknown key (`loc` ends with that key)."""
    models: list[type[BaseModel]] = [SweepSpec]
    for part in loc[:-1]:
        field = models[0].model_fields.get(part) if len(models) == 1 and isinstance(part, str) else None
        if field is not None:
            models = _models_in(field.annotation)
        else:  # a union member's tag narrows the choice; a list index or a dict key keeps it
            models = [m for m in models if part in (m.__name__, *_tags(m))] or models
    return list(models[0].model_fields) if len(models) == 1 else []


def _tags(model: type[BaseModel]) -> tuple[Any, ...]:
    kind = model.model_fields.get("kind")
    return get_args(kind.annotation) if kind is not None else ()


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def parse_spec(data: Any, source: str = "spec") -> SweepSpec:
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the top level must be a mapping with 'name' and 'models'")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{source}: {_format_error(e)}") from None
    for m in spec.models:
        if m.factory is not None:
            check_factory(m.factory, source=f"{source}: models.{m.name}.factory")
    return spec


def check_factory(path: str, source: str) -> None:
    """Import the factory's module and find the callable (this runs the user's module code)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to fix
        raise SpecError(f"{source}: cannot import {module_name!r}: {type(e).__name__}: {e}") from None
    if not callable(getattr(module, attr, None)):
        raise SpecError(f"{source}: module {module_name!r} has no callable {attr!r}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True) if key_node.tag != "tag:yaml.org,2002:merge" else None
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key if isinstance(key, (str, int, float, bool)) else None)
        return super().construct_mapping(node, deep)


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: no such spec file")
    try:
        data = yaml.load(p.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{p}: invalid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not a text file") from None
    return parse_spec(data, source=str(p))
