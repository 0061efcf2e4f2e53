"""Models handed to `sweeper.sweep` in memory: a function or an nn.Module subclass (defined in a
notebook or a script's `__main__`, or anywhere) given as a model's `factory`, carried to the
measuring processes by value.

cloudpickle (what Ray ships functions with) pickles what lives in `__main__`, or in no importable
module, by value: the class's or function's code travels in the trial itself, so no worker has to
import the notebook. What an importable module defines travels by reference, as a
`package.module:callable` factory does. The trial's id holds the callable's name and a hash of
its source (else of its pickle), so a changed model is a new trial, an unchanged one resumes.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

from sweeper.spec.sweep_spec import SpecError
from sweeper.zoo.sources import dump_by_value


def carry_callables(data: dict[str, Any], source: str = "spec") -> dict[str, Any]:
    """`data` (a spec as a dict) with each model whose `factory` is a callable turned into a model
    carried by value (`by_value`, `factory_ref`); everything else as it was."""
    models = data.get("models")
    if not isinstance(models, list):
        return data
    return {**data, "models": [_carried(m, f"{source}: models[{i}]") for i, m in enumerate(models)]}


def _carried(model: Any, where: str) -> Any:
    if not isinstance(model, dict) or not callable(model.get("factory")):
        return model
    made = model["factory"]
    try:
        blob = dump_by_value(made)
    except Exception as e:
        raise SpecError(f"{where}.factory: cannot send {made!r} to the workers: {type(e).__name__}: {e}") from None
    name = f"{getattr(made, '__module__', '?')}.{getattr(made, '__qualname__', type(made).__name__)}"
    out = {k: v for k, v in model.items() if k != "factory"}
    out.setdefault("name", getattr(made, "__name__", "model"))
    return {**out, "by_value": blob, "factory_ref": f"{name}@{_fingerprint(made, blob)}"}


def _fingerprint(made: Any, blob: str) -> str:
    try:
        text = inspect.getsource(made)
    except (OSError, TypeError):  # no source to read (built in a REPL line, a C function)
        text = blob
    return hashlib.sha256(text.encode()).hexdigest()[:12]
