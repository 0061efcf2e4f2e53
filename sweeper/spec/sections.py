"""The sections of a spec below its top level: a model (and a factory model's inputs), the axes
of the grid, how each trial is measured, and the resources it gets. Strict pydantic models; no
torch or Ray, so a spec validates instantly."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sweeper import zoo
from sweeper.results.schema import MODES
from sweeper.spec import bucketing, options
from sweeper.spec.base import PositiveInt, Strict

Mode = Literal[MODES]  # type: ignore[valid-type]  # the values of the rows' mode column
Phase = Literal["infer", "train", "generate"]
Cache = Literal["static", "dynamic"]
Precision = Literal["fp32", "bf16"]
Scope = Literal["whole", "regional"]
Path = Literal["jit", "aoti"]

FACTORY_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_LIBRARY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*$")
"""After `timm:` or `hf:`: timm architectures and transformers model types (which use '-' and '_')."""


def check_name(value: str, what: str) -> str:
    """A model, sweep or workload name: it becomes a label and a directory name."""
    if not _NAME_RE.match(value):
        raise ValueError(f"{value!r} is not a valid {what} name (letters, digits, '_', '.', '-')")
    return value


class InputSpec(Strict):
    """How to build inputs for a user model that returns a plain `nn.Module`."""

    kind: Literal["image", "tokens", "tensor"]
    """image: (B, channels, size, size) floats; tokens: (B, seq_len) ids; tensor: (B, *shape) floats."""
    channels: PositiveInt = 3
    """Image channels (kind image)."""
    size: PositiveInt = 224
    """Image height and width in pixels (kind image)."""
    vocab_size: PositiveInt = 30522
    """Token ids are drawn below this (kind tokens)."""
    shape: list[PositiveInt] = Field(default_factory=list)
    """One item's shape without the batch dimension (kind tensor, required there)."""
    num_classes: PositiveInt | None = None
    """Classes for the training loss (cross-entropy on random labels); None: mean-square loss."""

    @model_validator(mode="after")
    def _shape_for_tensor(self) -> InputSpec:
        if self.kind == "tensor" and not self.shape:
            raise ValueError("kind 'tensor' needs 'shape' (the per-sample shape, batch excluded)")
        return self


class ModelSpec(Strict):
    """One model: a zoo name, `timm:<architecture>`, `hf:<model_type>` with a `task`, or the user's
    own `package.module:factory` (or, through `sweeper.sweep`, a callable carried by value)."""

    name: str
    """A zoo name (see `sweeper models`), `timm:NAME`, `hf:MODEL_TYPE`, or a label for a factory model."""
    factory: str | None = None
    """`package.module:callable` returning an nn.Module or a sweeper.zoo.Bundle. Runs that code."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the factory; overrides for a zoo model's builder; timm.create_model's
    keyword arguments (plus `input_size: [C, H, W]`); an `hf:` model's config overrides."""
    task: str | None = None
    """An `hf:` model's task: causal-lm, masked-lm, seq-cls, seq2seq or image-cls (the AutoModelFor...
    class, its inputs and its training loss)."""
    input: InputSpec | None = None
    """Inputs for a factory that returns a plain nn.Module."""
    block: str | None = None
    """Class name of the model's repeated block (e.g. `DecoderLayer`): what `scope: regional`
    compiles. Zoo models know theirs, other models' is found when the trial runs; this overrides both."""
    by_value: str | None = None
    """Set by `sweeper.sweep` for an in-memory callable: the callable, cloudpickled (base64). Not part
    of the trial's id: `factory_ref` names it there."""
    factory_ref: str | None = None
    """Set with `by_value`: the callable's module and name and a hash of its source (its identity)."""

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        prefix, sep, rest = v.partition(":")
        if sep and prefix in zoo.SOURCE_PREFIXES:
            if not _LIBRARY_NAME_RE.match(rest):
                raise ValueError(f"{v!r}: name the {prefix} model after '{prefix}:' (letters, digits, '_', '.', '-')")
            return v
        return check_name(v, "model")

    @field_validator("factory")
    @classmethod
    def _factory_ok(cls, v: str | None) -> str | None:
        if v is not None and not FACTORY_RE.match(v):
            raise ValueError(f"{v!r} is not of the form 'package.module:callable'")
        return v

    @property
    def source(self) -> str:
        """zoo, timm, hf, factory or callable (sweeper.zoo.sources)."""
        return zoo.source_of(self.name, self.factory, self.by_value)

    @model_validator(mode="after")
    def _known(self) -> ModelSpec:
        source = self.source
        if self.factory is not None and self.by_value is not None:
            raise ValueError("give either 'factory' or a callable, not both")
        if source in ("zoo", "timm", "hf") and self.input is not None:
            raise ValueError(f"'input' is only for factory models; {source} models build their own")
        if source == "zoo" and self.name not in zoo.REGISTRY:
            raise ValueError(f"unknown model {self.name!r}; valid: {', '.join(zoo.names())}, or timm:NAME, "
                             "hf:MODEL_TYPE (see `sweeper models`)")
        if source == "hf" and self.task not in zoo.HF_TASKS:
            raise ValueError(f"{self.name} needs a 'task': one of {', '.join(zoo.HF_TASKS)}"
                             + (f" (got {self.task!r})" if self.task is not None else ""))
        if source != "hf" and self.task is not None:
            raise ValueError("'task' is only for hf: models")
        return self

    @property
    def blocks(self) -> tuple[str, ...]:
        """Class names of the repeated blocks regional compilation compiles, where known before the
        model is built: the spec's `block`, else the zoo's (empty: found when the trial runs)."""
        if self.block is not None:
            return (self.block,)
        return zoo.REGISTRY[self.name].blocks if self.source == "zoo" else ()

    def identity(self) -> dict[str, Any]:
        """The model as it enters a trial's id: fields added later (`block`, `task`, `factory_ref`)
        only when set, and never the pickled callable (`factory_ref` stands for it)."""
        later = {k for k in ("block", "task", "by_value", "factory_ref") if getattr(self, k) is None}
        return self.model_dump(mode="json", exclude=later | {"by_value"})

    @property
    def input_task(self) -> str:
        """vision, nlp or custom: which inputs, and which item unit (the rows' `task`)."""
        source = self.source
        if source == "zoo":
            return zoo.REGISTRY[self.name].task
        if source == "timm":
            return "vision"
        if source == "hf":
            return zoo.HF_TASKS[self.task]
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


class Axes(Strict):
    """The grid: every combination becomes one trial (impossible ones are dropped, with a reason)."""

    mode: list[Mode] = Field(default_factory=lambda: ["eager", "default"])
    """eager (the baseline), or a torch.compile mode."""
    dynamic: list[bool | None] = Field(default_factory=lambda: [None])
    """torch.compile(dynamic=...): null is automatic dynamic (recompile once as dynamic)."""
    batch_size: list[PositiveInt] = Field(default_factory=lambda: [8])
    """Items (images, sequences) per batch."""
    seq_len: list[PositiveInt] = Field(default_factory=lambda: [128])
    """Sequence length for NLP models (tokens); ignored for vision models."""
    phase: list[Phase] = Field(default_factory=lambda: ["infer"])
    """infer (eval, no_grad), train (forward, backward and an AdamW step), or generate (a causal LM's
    greedy `generate`: prefill of the prompt batch, then `new_tokens` decoded one at a time from a KV cache)."""
    precision: list[Precision] = Field(default_factory=lambda: ["fp32"])
    """fp32, or bf16 through torch.autocast."""
    bucketing: list[str] = Field(default_factory=lambda: ["none"])
    """Padded length of each batch of a token stream: none, multiple:N, pow2, list:A,B,..., quantile:K."""
    mark_dynamic: list[bool] = Field(default_factory=lambda: [False])
    """torch._dynamo.mark_dynamic on every input dimension that varies over a workload's stream."""
    scope: list[Scope] = Field(default_factory=lambda: ["whole"])
    """What torch.compile compiles: the whole model, or each repeated block in place (regional
    compilation: one compiled block serves every copy of it)."""
    accelerator_type: list[str] | None = None
    """GPU types to run every setting on, by Ray's node resource `accelerator_type:<NAME>` (e.g. A100,
    H100): each setting becomes one trial per type, placed on a node of that type. None: wherever Ray
    places it."""
    new_tokens: list[PositiveInt] = Field(default_factory=lambda: [32])
    """Tokens decoded greedily after the prompt (phase generate only; seq_len is the prompt's length)."""
    cache: list[Cache] = Field(default_factory=lambda: ["static"])
    """The KV cache of phase generate: static (preallocated, what transformers compiles the decode step
    with) or dynamic (grows each step)."""

    options: dict[str, dict[str, Any]] | None = None
    """Named inductor option sets (`torch.compile(options=...)`), e.g. `{default: {}, cdt:
    {coordinate_descent_tuning: true}}`: every compiled trial runs under each set, its mode's own
    options merged under it. The empty (or `default`) set is what the others are priced against."""
    path: list[Path] = Field(default_factory=lambda: ["jit"])
    """How the compiled model reaches its first call: jit (torch.compile at start-up) or aoti
    (torch.export, AOTInductor package, loaded in a fresh process; inference, fixed shapes)."""

    _check = field_validator("mode", "dynamic", "batch_size", "seq_len", "phase", "precision",
                             "bucketing", "mark_dynamic", "scope", "new_tokens", "cache", "path")(
        classmethod(lambda cls, v: _no_dupes(v))
    )

    @field_validator("options")
    @classmethod
    def _option_sets(cls, v: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
        if v is None:
            return v
        for name in v:
            check_name(name, "option set")
        return options.check_distinct(v, options.check_sets(v))

    @field_validator("accelerator_type")
    @classmethod
    def _accelerator_types(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        for name in _no_dupes(v):
            if not name or not all(c.isalnum() or c in "_-." for c in name):
                raise ValueError(f"{name!r} is not a Ray accelerator type name (letters, digits, '_', '-', '.')")
        return v

    @field_validator("bucketing")
    @classmethod
    def _policies(cls, v: list[str]) -> list[str]:
        for text in v:
            bucketing.parse(text)
        return v


class MeasureSpec(Strict):
    """How each trial is timed; the defaults follow the metric definitions of docs/measurement.md."""

    warmup_iters: PositiveInt = 3
    """Steady iterations after the first (compiling) call, before timing."""
    windows: Annotated[int, Field(ge=5)] = 10
    """Timed windows per arm; throughput is the median over windows, and the speedup's interval
    resamples the pairs of alternated eager and compiled windows."""
    min_window_iters: PositiveInt = 5
    """Each window runs at least this many iterations (and at least min_window_s)."""
    min_window_s: Annotated[float, Field(gt=0)] = 0.1
    """Each window runs until both the iteration floor and the time floor are met."""
    trial_timeout_s: Annotated[float, Field(gt=0)] = 1800.0
    """Wall-clock limit per trial process; a hung compile or run is killed with its children."""
    backend: Literal["inductor", "aot_eager", "eager"] = "inductor"
    """torch.compile backend; aot_eager/eager are for plumbing checks, not for answers."""
    matmul_precision: Literal["highest", "high", "medium"] = "high"
    """torch.set_float32_matmul_precision for every trial (recorded in every row)."""
    accuracy_tol: Annotated[float, Field(gt=0)] | None = None
    """Tolerance of the accuracy check; None: by precision (docs/measurement.md). With a float64 reference
    a tenth of it is the floor of the allowed error; without one, the bound vs eager."""
    warm_compile: bool = True
    """Also measure compile time in a second process whose cache holds the trial's artifacts."""
    megacache_warm_start: bool = True
    """With warm_compile, also measure a deployment's warm start: a third process loads the trial's
    Mega-Cache artifact into an empty cache and compiles (`warm_megacache_s`). False skips that
    process (the artifact is still saved, so `sweeper export` still works)."""
    recompile_limit: PositiveInt | None = None
    """torch._dynamo recompile limit; None keeps torch's default."""
    compile_threads: PositiveInt | None = None
    """Inductor compile workers per trial (TORCHINDUCTOR_COMPILE_THREADS). None keeps torch's
    default, one per core of the host (up to 32): trials that share a host then compete for its cores,
    and a compiling trial disturbs its neighbour's launch-bound timings."""
    seed: int = 0
    """Seeds the weights and the inputs of every trial."""
    memory_cap_gib: Annotated[float, Field(gt=0)] | None = None
    """Cap the caching allocator at this many GiB per trial (as on a smaller GPU); None: no cap."""
    gpu_util: bool = True
    """Sample GPU utilization and power through NVML during the timed windows (CUDA only)."""
    epoch_images: PositiveInt | None = None
    """Images in one epoch of a vision model: the rows' per-epoch seconds (None: none, or the stream's)."""
    epoch_sequences: PositiveInt | None = None
    """Sequences in one epoch of an NLP model, likewise."""
    host_wait_s: Annotated[float, Field(ge=0)] | None = None
    """Most seconds a trial's timed windows wait, in all, for the host's CPUs to run at their fast
    state (the witness is read before each round). None: 30 on a GPU, where a launch-bound eager step
    follows the host's speed and a CUDA-graph replay does not; 0 on the CPU, where both arms slow
    alike. 0: time at whatever speed the host runs, with no extra rounds for the slow state."""
    target_se_pct: Annotated[float, Field(ge=0)] | None = None
    """More rounds are timed (up to 6x `windows`) while the standard error of an arm's headline median step is
    above this percentage. None: 2.5 on a GPU (a launch-bound step's windows spread 10-15%), off on CPU; 0: off."""
    trace: bool = False
    """Keep each compiled trial's TORCH_TRACE log of its cold compile (RESULTS/traces, `sweeper trace`).
    Tracing costs compile time, so a traced trial has an id of its own."""

    def identity(self) -> dict[str, Any]:
        """The settings as they enter a trial's id: a setting added after the first release enters
        only when it differs from its default, so the ids of specs that leave it out stay as they were."""
        later = {k for k in _LATER_MEASURE_SETTINGS if getattr(self, k) == type(self).model_fields[k].default}
        return self.model_dump(mode="json", exclude=later)


_LATER_MEASURE_SETTINGS = ("compile_threads", "memory_cap_gib", "gpu_util", "epoch_images", "epoch_sequences", "trace",
                           "megacache_warm_start", "host_wait_s", "target_se_pct")
