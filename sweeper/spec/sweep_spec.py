"""The experiment schema: load a YAML sweep spec, validate every field, fail in one line.

The top level of a spec is `SweepSpec`; its sections are in `spec.sections`, its workloads in
`spec.workload`. Nothing here imports torch or Ray, so `sweeper validate` is instant and a bad
spec is refused before anything starts.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from sweeper import SweeperError
from sweeper.spec.base import Strict
from sweeper.spec.resources import Resources
from sweeper.spec.search_spec import SearchSpec
from sweeper.spec.sections import Axes, InputSpec, MeasureSpec, ModelSpec, Phase, Precision, check_name
from sweeper.spec.workload import WorkloadSpec

__all__ = ["InputSpec", "Phase", "Precision", "SpecError", "SweepSpec", "load_spec", "parse_spec"]
"""InputSpec, Phase and Precision live in spec.sections; the CLI and the workbench still import them
from here."""


class SpecError(SweeperError):
    """A user mistake in a spec: the message is one line naming the field."""


class SweepSpec(Strict):
    """A sweep: its models, the grid of settings, how each trial is measured and what it gets."""

    name: str
    """The sweep's name (letters, digits, '_', '.', '-'): its results directory and its label."""
    description: str = ""
    """Free text kept with the sweep; changes no trial."""
    models: list[ModelSpec]
    """The models to measure, each with a name of its own (at least one)."""
    axes: Axes = Field(default_factory=Axes)
    """The grid of settings: every combination is one trial."""
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    """How each trial is measured."""
    resources: Resources = Field(default_factory=Resources)
    """What each trial gets of the cluster, and how many run at once."""
    workloads: dict[str, WorkloadSpec] = Field(default_factory=dict)
    """Named input streams; each applies to every model of its task instead of the fixed seq_len grid."""
    results_dir: str | None = None
    """Where rows and the report go; default results/<name>. Relative to the working directory."""
    search: SearchSpec = Field(default_factory=SearchSpec)
    """Which settings run: the whole grid (default) or a budgeted search (sweeper.spec.search_spec)."""

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        return check_name(v, "sweep")

    @field_validator("workloads")
    @classmethod
    def _workload_names(cls, v: dict[str, WorkloadSpec]) -> dict[str, WorkloadSpec]:
        for name in v:
            check_name(name, "workload")
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
        tasks_by_model = {m.name: m.input_task for m in self.models}
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
        found = self.model_dump(mode="json", exclude={"description", "results_dir", "search"})
        # settings added later enter only when set, so a sweep started before them still resumes
        found["models"] = [m.identity() for m in self.models]
        for axis, default in (("scope", ["whole"]), ("options", None), ("path", ["jit"]), ("new_tokens", [32]),
                              ("cache", ["static"])):
            if found["axes"][axis] == default:
                del found["axes"][axis]
        if self.axes.accelerator_type is None:
            del found["axes"]["accelerator_type"]
        if self.resources.trials_per_gpu == 1:
            del found["resources"]["trials_per_gpu"]
        del found["resources"]["slow_reruns"]  # whether a trial is timed again, not what it measures
        if self.measure.target_se_pct is None:
            del found["measure"]["target_se_pct"]
        return found

    @staticmethod
    def setting_defaults() -> dict[str, Any]:
        """Each measure and resources setting's default, by its path in `identity()` (e.g.
        "measure.gpu_util"): a setting a sweep's manifest lacks was added after the sweep started,
        and at its default it measures what the sweep measured without it."""
        return {f"{name}.{k}": v for name, section in (("measure", MeasureSpec), ("resources", Resources))
                for k, v in section().model_dump(mode="json").items()}

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:16]


def _format_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown key (allowed: {', '.join(_allowed_keys(e['loc']))})"
        elif e["type"] == "literal_error" or e["type"] in ("greater_than", "greater_than_equal", "less_than_equal",
                                                           "int_parsing",
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
    except Exception as e:
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


_UNCLOSED = {"while parsing a flow sequence": "'['", "while parsing a flow mapping": "'{'",
             "while scanning a quoted scalar": "the quote"}
"""YAML errors found after the fact: the mark that matters is where the bracket or quote opened."""


def _yaml_error_text(e: yaml.YAMLError) -> str:
    """` at line L, column C: problem`, pointing at an unclosed bracket or quote where it opened
    (PyYAML's own mark is where it noticed, one line or more further down)."""
    mark, context = getattr(e, "problem_mark", None), getattr(e, "context", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    opened = getattr(e, "context_mark", None)
    if context in _UNCLOSED and opened is not None:
        seen = f" at line {mark.line + 1}" if mark else ""
        return (f" at line {opened.line + 1}, column {opened.column + 1}: {_UNCLOSED[context]} opened here "
                f"is never closed ({problem}{seen})")
    return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else f": {problem}"


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: no such spec file")
    try:
        data = yaml.load(p.read_text(), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        raise SpecError(f"{p}: invalid YAML{_yaml_error_text(e)}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not a text file") from None
    return parse_spec(data, source=str(p))
