"""One builder interface for every source of a model: `build(model, device) -> Bundle`.

A model comes from one of five sources, told apart by how the spec names it:

- the zoo: a name of `sweeper models` (`resnet50`, `bert-tiny`);
- timm: `timm:<architecture>` (timm.create_model, random weights; timm is an optional extra);
- Hugging Face: `hf:<model_type>` with a `task` (AutoConfig.for_model and the task's AutoModelFor...);
- a factory: `factory: package.module:callable`, imported in the measuring process;
- a callable: a function or nn.Module subclass handed to `sweeper.sweep` in memory, carried to the
  measuring process by value (`by_value`, base64 cloudpickle).

This module imports no torch at import time: what a spec needs to know before anything is built
(the input task, the zoo's blocks) is answered here from names alone.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
from typing import Any, Protocol

from sweeper.zoo import REGISTRY, source_of


class ModelRef(Protocol):
    """What a builder reads of a spec's model (sweeper.spec.sections.ModelSpec is one)."""

    name: str
    factory: str | None
    by_value: str | None
    kwargs: dict[str, Any]
    task: str | None
    input: Any


def library_name(name: str) -> str:
    """The architecture or model type after a `timm:` / `hf:` prefix."""
    return name.partition(":")[2]


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_by_value(blob: str) -> Any:
    """The callable `sweeper.sweep` pickled by value (cloudpickle, base64)."""
    import cloudpickle

    return cloudpickle.loads(base64.b64decode(blob))


def dump_by_value(obj: Any) -> str:
    """`obj` pickled by value where it lives in `__main__` (a notebook, a script), by reference otherwise."""
    import cloudpickle

    return base64.b64encode(cloudpickle.dumps(obj)).decode("ascii")


def build(model: ModelRef, device: Any = None) -> Any:
    """The model's Bundle, built under `device` as torch's default device (see `build_placed`)."""
    return build_placed(model, device)[0]


def build_placed(model: ModelRef, device: Any = None) -> tuple[Any, str]:
    """The model's Bundle and where its weights were made. Every source is built under `device` as
    torch's default device, so its random weights are drawn there: "device" (a CUDA or other
    accelerator), "host" (no device, or the CPU). A factory's or callable's code may not run there
    (it converts a tensor to numpy, draws from a CPU generator, ...): it is then called again on the
    host and its model moved afterwards, "host: <why>"; the factory's own error, if the host build
    fails too. A factory that must build on the host says so itself (`with torch.device("cpu"):`)."""
    from sweeper.zoo.plain import to_bundle  # imports torch

    on_device = device is not None and getattr(device, "type", str(device)) != "cpu"
    place = "device" if on_device else "host"
    source = source_of(model.name, model.factory, model.by_value)
    if source in ("factory", "callable"):
        made = _import(model.factory) if source == "factory" else load_by_value(model.by_value)

        def make() -> Any:
            return to_bundle(made(**model.kwargs), model.input, model.factory or model.name)
        if not on_device:
            return make(), place
        import torch

        host_rng = torch.get_rng_state()  # the host build draws as if the try had not happened
        try:
            with device:
                return make(), place
        except Exception as e:  # any failure under the device: the host build decides
            why = " ".join(f"{type(e).__name__}: {e}".split())
            place = f"host: failed under {device} ({why[:200]})"
        torch.set_rng_state(host_rng)
        return make(), place
    with device if device is not None else contextlib.nullcontext():
        if source == "timm":
            return _import("sweeper.zoo.timm_models:build")(library_name(model.name), **model.kwargs), place
        if source == "hf":
            return _import("sweeper.zoo.hf_models:build")(library_name(model.name), model.task, **model.kwargs), place
        return _import(REGISTRY[model.name].builder)(**model.kwargs), place
