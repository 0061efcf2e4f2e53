"""The package's shape, checked from its source: the import graph has no cycle and every import
points down the layer order; the pandas/plotly half never imports torch or Ray; modules and
functions stay small enough to read whole.

Layers (an arrow: may import, and so may import whatever that one may):

    cli -> api -> run, report, deploy
    run -> measure, envinfo          report -> analysis     deploy -> analysis
    measure -> zoo, spec, envinfo    analysis -> results
    spec -> zoo -> results

Every module may import the root package `sweeper` (its version). Imports inside functions
count: a lazy import still ties the two modules together.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sweeper"

LAYER_IMPORTS: dict[str, set[str]] = {
    "cli": {"api"},
    "api": {"run", "report", "deploy"},
    "deploy": {"analysis"},
    "run": {"measure", "envinfo"},
    "measure": {"zoo", "spec", "envinfo"},
    "spec": {"zoo"},
    "zoo": {"results"},
    "report": {"analysis"},
    "analysis": {"results"},
    "results": set(),
    "envinfo": set(),
    "docs": {"spec"},  # sweeper/docs.py: the reference pages, from the spec and the row contract
}
"""Each layer's direct lower neighbours; what it may import is everything reachable from here.
`api` (sweeper.sweep, sweeper.load, Results) sits at the top beside nothing but the CLI, which is a
thin layer over it: a notebook and the command line run a sweep through the same code."""

LAZY_REEXPORTS = {("sweeper", "sweeper.api")}
"""The root package hands out `sweeper.sweep` / `load` / `Results` from sweeper.api on first use (a
module `__getattr__`, PEP 562): importing `sweeper`, as every module and measuring process does,
imports nothing of the API, so this edge is neither a load-time cycle nor an import up the layers."""

TORCH_OR_RAY = ("torch", "torchvision", "transformers", "ray")
NEVER_IMPORTS: dict[str, tuple[str, ...]] = {
    "analysis": TORCH_OR_RAY,  # a report is rebuilt anywhere from Parquet files: no torch, no Ray
    "report": TORCH_OR_RAY,
    "deploy": TORCH_OR_RAY,  # writes a module that imports torch; never imports it itself
    "results": TORCH_OR_RAY,
    "spec": ("torch", "torchvision", "ray"),  # `sweeper validate` is instant (a text workload's
                                               # tokenizer comes from transformers, without torch)
}
RAY_MODULES = ("sweeper.run.ray_tune", "sweeper.run.search", "sweeper.run.collector")
"""The only modules that import Ray: the runner and the Tune searcher it drives."""

MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 40

PENDING_REWRITE: tuple[str, ...] = ()
"""Being rewritten now (the measuring pipeline, the report and the CLI, the one ranking rule, the
runner): exempt from the size limits until that work lands; the import rules hold for them."""
DATA_TABLES = {"sweeper/results/schema.py": "COLUMNS, the row contract's table of columns"}
"""Modules whose length is a table of data, not code: exempt from the module limit."""


@dataclass(frozen=True)
class Import:
    source: str
    """The importing module (dotted)."""
    target: str
    """The imported module: a sweeper module, or a third-party top-level name."""
    line: int


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str:
    """The module an imported name lives in: `sweeper.measure.stream` as itself, `sweeper.zoo` as
    the package, `sweeper.__version__` as the root package."""
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """Every import in a module, at any depth (functions included), relative ones resolved."""
    is_package = path.name == "__init__.py"
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] if base.startswith("sweeper") else [base]
        else:
            continue
        for target in targets:
            top = target.split(".")[0]
            found.append(Import(name, _resolve(target, known) if top == "sweeper" else top, node.lineno))
    return found


def graph() -> list[Import]:
    known = modules()
    return [imp for name, path in known.items() for imp in imports_of(name, path, known)
            if (imp.source, imp.target) not in LAZY_REEXPORTS]


def layer(module: str) -> str:
    """sweeper.<layer>...; `python -m sweeper` is the CLI; the root package is its own."""
    parts = module.split(".")
    if module == "sweeper.__main__":
        return "cli"
    return parts[1] if len(parts) > 1 else "sweeper"


def may_import(from_layer: str) -> set[str]:
    seen, todo = {from_layer, "sweeper"}, [from_layer]
    while todo:
        for lower in LAYER_IMPORTS.get(todo.pop(), set()):
            if lower not in seen:
                seen.add(lower)
                todo.append(lower)
    return seen


def cycles(edges: list[Import]) -> list[list[str]]:
    """Every strongly connected group of more than one module (or a module importing itself)."""
    succ: dict[str, set[str]] = {}
    for e in edges:
        if e.target.startswith("sweeper"):
            succ.setdefault(e.source, set()).add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1 or v in succ.get(v, ()):
                groups.append(sorted(group))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return groups


def layer_violations(edges: list[Import]) -> list[str]:
    bad = []
    for e in edges:
        if not e.target.startswith("sweeper"):
            continue
        src, dst = layer(e.source), layer(e.target)
        if src != dst and dst not in may_import(src):
            bad.append(f"{e.source}:{e.line} imports {e.target} ({src} may not import {dst})")
    return bad


def third_party_violations(edges: list[Import]) -> list[str]:
    bad = []
    for e in edges:
        if e.target in NEVER_IMPORTS.get(layer(e.source), ()):
            bad.append(f"{e.source}:{e.line} imports {e.target}")
        elif e.target == "ray" and e.source not in RAY_MODULES:
            bad.append(f"{e.source}:{e.line} imports ray (only {', '.join(RAY_MODULES)} may)")
    return bad


def oversized(path: Path) -> list[str]:
    """The module if it is over MAX_MODULE_LINES, and each function over MAX_FUNCTION_LINES."""
    text = path.read_text()
    rel = path.relative_to(PACKAGE.parent).as_posix()
    found = []
    if len(text.splitlines()) > MAX_MODULE_LINES and rel not in DATA_TABLES:
        found.append(f"{rel}: {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                found.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    return found


# ---------------------------------------------------------------- the checks


def test_the_graph_sees_every_kind_of_import():
    """Absolute, relative and function-level imports all land in the graph, resolved to modules."""
    edges = {(e.source, e.target) for e in graph()}
    assert ("sweeper.measure.__main__", "sweeper.measure.process") in edges  # a module in a package
    assert ("sweeper.spec.sweep_spec", "sweeper.spec.sections") in edges
    assert ("sweeper.spec.sweep_spec", "sweeper.zoo") not in edges  # that one moved to sections
    assert ("sweeper.spec.sections", "sweeper.zoo") in edges  # `from sweeper import zoo`: the package
    assert ("sweeper.run.state", "sweeper") in edges  # `from sweeper import __version__`: the root
    assert ("sweeper.api.run", "sweeper.run.ray_tune") in edges  # imported inside a function
    assert ("sweeper", "sweeper.api") not in edges  # the root's lazy re-export (LAZY_REEXPORTS)
    assert ("sweeper.spec.lengths", "transformers") in edges  # third party, inside a function


def test_relative_imports_resolve_against_their_package(tmp_path: Path):
    pkg = tmp_path / "sweeper" / "run"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("from . import state\nfrom ..spec import trials\n\ndef f():\n    from .. import zoo\n")
    known = {n: Path() for n in ("sweeper", "sweeper.run", "sweeper.run.state", "sweeper.spec",
                                 "sweeper.spec.trials", "sweeper.zoo", "sweeper.run.mod")}
    found = imports_of("sweeper.run.mod", pkg / "mod.py", known)
    assert [i.target for i in found] == ["sweeper.run.state", "sweeper.spec.trials", "sweeper.zoo"]


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_every_import_points_down_the_layers():
    assert layer_violations(graph()) == []


def test_nothing_imports_the_cli():
    assert [f"{e.source} -> {e.target}" for e in graph()
            if layer(e.target) == "cli" and layer(e.source) != "cli"] == []


def test_the_layers_themselves_form_no_circle():
    for name in LAYER_IMPORTS:
        assert all(name not in may_import(lower) for lower in LAYER_IMPORTS[name]), name


def test_the_pandas_half_never_imports_torch_or_ray_and_only_the_runner_imports_ray():
    assert third_party_violations(graph()) == []


def test_envinfo_serves_the_run_and_measure_layers():
    users = {layer(e.source) for e in graph() if e.target == "sweeper.envinfo"}
    assert users and users <= may_import("cli") - {"report", "analysis", "results", "spec", "zoo"}


def test_modules_and_functions_stay_small():
    checked = [p for p in sorted(PACKAGE.rglob("*.py"))
               if not p.relative_to(PACKAGE.parent).as_posix().startswith(PENDING_REWRITE)]
    assert [line for p in checked for line in oversized(p)] == []


def test_the_exemptions_name_existing_files():
    files = [p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py")]
    assert all(any(f.startswith(prefix) for f in files) for prefix in PENDING_REWRITE)
    assert all(f in files for f in DATA_TABLES)


def test_the_checks_catch_a_violation():
    """A made-up import against each rule is reported (the rules are not vacuous)."""
    up = Import("sweeper.results.store", "sweeper.analysis.frames", 1)
    side = Import("sweeper.measure.pipeline", "sweeper.report.page", 1)
    cli = Import("sweeper.run.state", "sweeper.cli.app", 1)
    torch = Import("sweeper.analysis.pareto", "torch", 1)
    ray = Import("sweeper.run.state", "ray", 1)
    assert len(layer_violations([up, side, cli])) == 3
    assert len(third_party_violations([torch, ray])) == 2
    loop = [Import("sweeper.spec.a", "sweeper.spec.b", 1), Import("sweeper.spec.b", "sweeper.spec.a", 1)]
    assert cycles(loop) == [["sweeper.spec.a", "sweeper.spec.b"]]
