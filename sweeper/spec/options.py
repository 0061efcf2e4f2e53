"""Named inductor option sets (`axes.options`) and the check of their keys.

A set is a mapping of `torch._inductor.config` names (`coordinate_descent_tuning`, `triton.cudagraphs`)
to values. The keys are checked against inductor's config module read as source text, found through
the import system without importing torch, so `sweeper validate` stays instant; where torch is not
installed nothing is checked and `options_check_note` says so. The measuring process merges a
mode's own options under the set (`sweeper.measure.inductor_options`).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

DEFAULT_SET = "default"
"""The name of the set the others are priced against (an empty set unless the spec says otherwise)."""
_KEY_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


@functools.cache
def known_keys() -> frozenset[str] | None:
    """Every option name inductor's config module defines (nested classes as `outer.name`, their
    bases' names included); None where torch or the module cannot be found."""
    try:
        found = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if found is None or found.origin is None:
        return None
    path = Path(found.origin).parent / "_inductor" / "config.py"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return None
    return frozenset(_names(tree.body, "", {}))


def _names(body: list[ast.stmt], prefix: str, classes: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    for node in body:
        if isinstance(node, ast.Assign):
            out |= {prefix + t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(prefix + node.target.id)
        elif isinstance(node, ast.ClassDef):
            inner = prefix + node.name + "."
            own = {n.removeprefix(inner) for n in _names(node.body, inner, classes)}
            for base in node.bases:  # `class cuda(cutlass)` has cutlass's options too
                own |= classes.get(base.id, set()) if isinstance(base, ast.Name) else set()
            classes[node.name] = own
            out |= {f"{prefix}{node.name}.{n}" for n in own}
        elif isinstance(node, (ast.If, ast.Try)):
            out |= _names(node.body, prefix, classes) | _names(getattr(node, "orelse", []), prefix, classes)
    return out


def check_sets(sets: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The option sets, or ValueError naming the first bad key or value (names: `check_name`)."""
    if not sets:
        raise ValueError("must name at least one option set (e.g. default: {})")
    keys = known_keys()
    for name, options in sets.items():
        if not isinstance(options, dict):
            raise ValueError(f"{name}: an option set is a mapping of inductor options (got {options!r})")
        for key, value in options.items():
            if not isinstance(key, str) or not _KEY_RE.match(key):
                raise ValueError(f"{name}: {key!r} is not an inductor option name")
            if keys is not None and key not in keys:
                hint = f" (did you mean {_close(key, keys)!r}?)" if _close(key, keys) else ""
                raise ValueError(f"{name}: unknown inductor option {key!r}{hint}")
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                raise ValueError(f"{name}.{key}: the value must be plain YAML data (got {value!r})") from None
    return sets


def check_distinct(sets: dict[str, Any], checked: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`sets` when no two of them (as `check_sets` read them) apply the same options."""
    seen = [json.dumps(o, sort_keys=True) for o in checked.values()]
    for i, (name, text) in enumerate(zip(sets, seen, strict=True)):
        if seen.index(text) < i:
            raise ValueError(f"{name}: same options as set {list(sets)[seen.index(text)]!r}")
    return sets


def _close(key: str, keys: frozenset[str]) -> str | None:
    import difflib

    match = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.75)
    return match[0] if match else None


def options_check_note(spec_has_options: bool) -> str | None:
    """What `sweeper validate` says when the option keys could not be checked here."""
    if spec_has_options and known_keys() is None:
        return ("axes.options: keys not checked (torch's inductor config is not importable here); "
                "the measuring process refuses an unknown one")
    return None
