"""Find a model's repeated block: what `scope: regional` compiles when the spec names none.

A block qualifies when its class has at least MIN_COPIES instances of identical structure (the
same classes all the way down, the same parameter and buffer shapes): dynamo then compiles the
block's code once and every copy of it reuses that. Of the qualifying classes the one whose
instances hold the most parameters is chosen (an outer layer holds at least what its sublayers
hold, so the layer wins over its attention or MLP; on a tie the outer one), and it must hold at
least MIN_PARAM_SHARE of the model's parameters: a block that repeats but is a small part of
the model saves little compile time and leaves most of the model eager. Plain containers
(Sequential, ModuleList, ModuleDict) and modules without submodules are never blocks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torch import nn

MIN_COPIES = 4
MIN_PARAM_SHARE = 0.5
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


@dataclass(frozen=True)
class BlockChoice:
    """The block found (`class_name`), or why none qualifies (`reason`)."""

    class_name: str | None
    copies: int = 0
    """Instances of the class (all of them are compiled; `identical` share one structure)."""
    identical: int = 0
    param_share: float = 0.0
    """Share of the model's parameters held by the class's instances."""
    reason: str | None = None

    @property
    def note(self) -> str:
        """The row's `block_choice`: `found: CLASS, ...` or `none: why`."""
        if self.class_name is None:
            return f"none: {self.reason}"
        return f"found: {self.class_name}, {self.copies} copies, {self.param_share:.0%} of parameters"


def _signature(module: nn.Module, memo: dict[int, tuple]) -> tuple:
    """The module's structure: class, own parameter and buffer shapes, children's structures."""
    key = id(module)
    if key not in memo:
        own = tuple((n, tuple(p.shape), str(p.dtype)) for n, p in module.named_parameters(recurse=False))
        bufs = tuple((n, tuple(b.shape)) for n, b in module.named_buffers(recurse=False))
        kids = tuple((n, _signature(c, memo)) for n, c in module.named_children())
        memo[key] = (type(module).__module__, type(module).__qualname__, own, bufs, kids)
    return memo[key]


def _outermost_by_class(model: nn.Module) -> dict[type, list[tuple[nn.Module, int]]]:
    """Every composite submodule by class, with its depth; a class's instances nested in another
    instance of that class are left out (compiling the outer one covers them)."""
    found: dict[type, list[tuple[nn.Module, int]]] = {}

    def walk(module: nn.Module, depth: int, inside: frozenset[type]) -> None:
        for child in module.children():
            cls = type(child)
            composite = any(True for _ in child.children()) and not isinstance(child, _CONTAINERS)
            if composite and cls not in inside:
                found.setdefault(cls, []).append((child, depth))
            walk(child, depth + 1, inside | {cls} if composite else inside)

    walk(model, 1, frozenset())
    return found


def _held(modules: list[nn.Module]) -> int:
    seen: dict[int, int] = {}
    for m in modules:
        for p in m.parameters():
            seen[id(p)] = p.numel()
    return sum(seen.values())


def find_repeated_block(model: nn.Module) -> BlockChoice:
    """The model's repeated block, or a BlockChoice saying why it has none."""
    total = _held([model])
    memo: dict[int, tuple] = {}
    candidates: list[tuple[float, int, BlockChoice]] = []
    most: tuple[int, int, str] = (0, 0, "")  # the most copies; on a tie the outermost class
    for cls, found in _outermost_by_class(model).items():
        identical = max(Counter(_signature(m, memo) for m, _ in found).values())
        most = max(most, (identical, -min(d for _, d in found), cls.__name__))
        if identical < MIN_COPIES:
            continue
        share = _held([m for m, _ in found]) / total if total else 0.0
        choice = BlockChoice(cls.__name__, len(found), identical, share)
        candidates.append((share, -min(d for _, d in found), choice))
    if not candidates:
        seen = f" (most: {most[2]}, {most[0]})" if most[0] else ""
        return BlockChoice(None, reason=f"no module class of {type(model).__name__} has {MIN_COPIES} or more "
                           f"copies of identical structure{seen}")
    share, _, best = max(candidates, key=lambda c: (c[0], c[1]))
    if share < MIN_PARAM_SHARE:
        return BlockChoice(None, reason=f"the largest repeated block, {best.class_name} ({best.copies} copies), "
                           f"holds {share:.1%} of the parameters, under {MIN_PARAM_SHARE:.0%}")
    return best
