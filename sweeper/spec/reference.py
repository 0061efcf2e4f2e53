"""The spec reference page, from the code: every section of a spec (a pydantic model), every field
with its type, default and the docstring written under it in the source (read with `ast`, since
pydantic keeps no field docstrings), in the order a spec is read."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


@dataclass(frozen=True)
class Section:
    path: str
    """Where the section sits in a spec, e.g. `models[].input` or `workloads.NAME.lengths`."""
    model: type[BaseModel]


@cache
def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string literal right after it): a subclass's own, else its base's."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
        for node, after in zip(body, [*body[1:], None], strict=True):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                    and isinstance(after.value.value, str):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _bounds(metadata: list[Any]) -> str:
    found = [f"{op} {getattr(m, attr)}" for m in metadata for attr, op in _BOUNDS.items()
             if getattr(m, attr, None) is not None]
    return f" ({', '.join(found)})" if found else ""


def type_text(annotation: Any) -> str:
    """A type as a reader of YAML sees it: `int (> 0)`, `"fp32" | "bf16"`, `list[str] | null`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Annotated:
        return type_text(args[0]) + _bounds(list(args[1:]) + [m for a in args[1:] for m in getattr(a, "metadata", [])])
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_text(a) for a in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        return "(the section's defaults)" if isinstance(value, BaseModel) else json.dumps(value)
    if field.default is PydanticUndefined:
        return "required"
    return json.dumps(field.default.value if hasattr(field.default, "value") else field.default)


def _nested(annotation: Any, path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models a field's type holds, with the path their keys take in a spec."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield path, annotation
    elif origin is list:
        yield from _nested(args[0], path + "[]")
    elif origin is dict:
        yield from _nested(args[1], path + ".NAME")
    elif origin is Annotated or origin in (Union, types.UnionType):
        for arg in args[:1] if origin is Annotated else args:
            yield from _nested(arg, path)


def sections(root: type[BaseModel]) -> list[Section]:
    """Every model reachable from the root, each once, depth first in field order."""
    found: list[Section] = []
    todo = [("", root)]
    while todo:
        path, model = todo.pop(0)
        if any(s.model is model for s in found):
            continue
        found.append(Section(path or "(top level)", model))
        children = [c for name, f in model.model_fields.items()
                    for c in _nested(f.annotation, f"{path}.{name}".lstrip("."))]
        todo[:0] = children
    return found


def missing_docs(root: type[BaseModel]) -> list[str]:
    """Fields without a docstring, as `Model.field`."""
    return [f"{s.model.__name__}.{name}" for s in sections(root) for name in s.model.model_fields
            if name not in field_docs(s.model)]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def section_markdown(section: Section) -> list[str]:
    model, docs = section.model, field_docs(section.model)
    lines = [f"## {model.__name__}", "", f"`{section.path}`" + (
        f": {_cell(inspect.cleandoc(model.__doc__))}" if model.__doc__ and model.__doc__ != BaseModel.__doc__ else ""),
        "", "| field | type | default | meaning |", "|---|---|---|---|"]
    for name, f in model.model_fields.items():
        kind = type_text(f.annotation) + _bounds(f.metadata)
        lines.append(f"| `{name}` | {_cell(kind)} | `{default_text(f)}` | "
                     f"{_cell(docs.get(name, ''))} |")
    return [*lines, ""]


def reference_markdown(root: type[BaseModel], intro: str) -> str:
    lines = [intro, ""]
    for s in sections(root):
        lines += section_markdown(s)
    return "\n".join(lines).rstrip("\n") + "\n"
