"""The option set and the path in a setting's label and in the code to paste.

A trial whose set changed the options was compiled as `torch.compile(model, dynamic=..., options={...})`
(its mode's options merged in, as the row's `inductor_options_json` records); an aoti trial was
exported and packaged, then loaded. These helpers write exactly that; `frames` calls them.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def applied_options(row: Any) -> dict[str, Any] | None:
    """The options the trial applied (None: the mode alone)."""
    text = row.get("inductor_options_json")
    return json.loads(text) if isinstance(text, str) else None


def _literal(options: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in sorted(options.items())) + "}"


def with_options(call: str, row: Any) -> str:
    """The torch.compile line `call` rewritten for the row's option set or its aoti path."""
    options = applied_options(row)
    if row.get("path") == "aoti":
        configs = f", inductor_configs={_literal(options)}" if options else ""
        load = ("torch._inductor.aoti_load_package('model.pt2')" if row.get("device_type") == "cpu" else
                "after CUDA is up in the serving process: "
                "torch._inductor.aoti_load_package('model.pt2', device_index=torch.cuda.current_device())")
        return ("ep = torch.export.export(model, args); "
                f"torch._inductor.aoti_compile_and_package(ep, package_path='model.pt2'{configs}); {load}")
    if not options or 'mode="' not in call:
        return call
    head, _, rest = call.partition('mode="')
    rest = rest.partition('"')[2].removeprefix(", ")
    return f"{head}{rest[:-1]}, options={_literal(options)})"


def label_parts(row: Any) -> list[str]:
    """What a setting's label adds for its option set and path."""
    parts = []
    name = row.get("option_set")
    if isinstance(name, str):
        parts.append(f"options {name}")
    if row.get("path") == "aoti":
        parts.append("aoti")
    return parts


def aoti_start_s(row: Any) -> float:
    """What an aoti deployment's start costs with an empty inductor cache: loading the package,
    inductor's CPU check the load runs (`aoti_isa_check_s`, where measured) and the first call
    beyond one steady step (comparable to a JIT setting's compile_s and its Mega-Cache warm start)."""
    isa = row.get("aoti_isa_check_s")
    load = float(row.get("aoti_load_s")) + (0.0 if _missing(isa) else float(isa))
    first = row.get("first_call_s")
    tp, items = row.get("throughput_items_s"), row.get("batch_size")
    if _missing(first):
        return load
    step = float(items) / float(tp) if not _missing(tp) and not _missing(items) and tp else 0.0
    return load + max(0.0, float(first) - step)
