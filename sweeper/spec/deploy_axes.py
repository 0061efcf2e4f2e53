"""The option-set and path axes in a trial's expansion: what enters its id, and which combinations
an AOTInductor package cannot measure (dropped with a reason, like any impossible combination)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.spec.sweep_spec import SweepSpec

AOTI_MODES = ("default", "max-autotune-no-cudagraphs")
"""Modes an AOTInductor package is built under: a package runs without CUDA graphs, so the
CUDA-graph modes would only repeat these."""


def option_id_keys(c: dict[str, Any], sets: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """What the option set and the path add to a trial's config (and so to its id): a non-empty
    set's options, and a path other than jit. A trial without either keeps the id it had before
    these axes existed; two sets with the same options are refused when the spec is read."""
    extra: dict[str, Any] = {}
    options = (sets or {}).get(c["option_set"]) or {}
    if options:
        extra["options"] = options
    if c["path"] != "jit":
        extra["path"] = c["path"]
    return extra


def applied_options(c: dict[str, Any], sets: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """The Trial fields of a combination's option set and path."""
    return {"option_set": c["option_set"], "path": c["path"], "options": (sets or {}).get(c["option_set"]) or {}}


def deploy_drop_reason(c: dict[str, Any], spec: SweepSpec) -> str | None:
    """Why an option set or an aoti combination cannot run, or None."""
    backend = spec.measure.backend
    if backend != "inductor" and (spec.axes.options or {}).get(c["option_set"]):
        return f"inductor options need the inductor backend (backend is {backend!r})"
    if c["path"] != "aoti":
        return None
    if backend != "inductor":
        return f"path 'aoti' builds with inductor (backend is {backend!r})"
    if c["phase"] != "infer":
        return "path 'aoti' packages inference only"
    if c["mode"] not in AOTI_MODES:
        return f"path 'aoti' runs without CUDA graphs: use {' or '.join(AOTI_MODES)} (not {c['mode']!r})"
    if c["dynamic"] is True:
        return "path 'aoti' exports fixed shapes here (dynamic True needs dynamic_shapes)"
    if c["workload"] is not None:
        return "path 'aoti' measures one fixed-shape batch, not a stream"
    if c["scope"] != "whole":
        return "path 'aoti' exports the whole model"
    return None
