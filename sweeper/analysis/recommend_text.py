"""Plain-text rendering of a Recommendation, for `sweeper recommend` in a terminal."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from sweeper.analysis.frames import fmt_num

if TYPE_CHECKING:
    from sweeper.analysis.recommend import Candidate, Recommendation

MAX_EXCLUSIONS_SHOWN = 12


def render(rec: Recommendation) -> str:
    ctx = rec.context
    where = " / ".join(str(v) for k, v in ctx.items() if v is not None and k != "model")
    lines = [f"{ctx['model']}" + (f" ({where})" if where else ""), f"  workload: {rec.workload_note}"]
    limits = _limits(rec.constraints)
    if limits:
        lines.append(f"  limits: {limits}")
    lines.append("")
    if rec.best is None:
        lines.append("No setting meets the constraints.")
    else:
        lines += [f"Recommendation: {rec.advice}", *_describe(rec.best, rec.eager)]
    if rec.runner_up is not None:
        lines += ["", f"Runner-up: {rec.runner_up.setting}  [{rec.runner_up.compile_call}]",
                  *_describe(rec.runner_up, rec.eager), f"  lost: {rec.runner_up_reason}"]
    lines += _exclusions(rec)
    return "\n".join(lines)


def _limits(constraints: dict[str, object]) -> str:
    parts = []
    if constraints.get("max_memory_gib") is not None:
        parts.append(f"peak memory <= {fmt_num(constraints['max_memory_gib'])} GiB")
    if constraints.get("max_compile_s") is not None:
        parts.append(f"cold compile <= {fmt_num(constraints['max_compile_s'])} s")
    if constraints.get("batch_size") is not None:
        parts.append(f"batch {constraints['batch_size']}")
    return ", ".join(parts)


def _describe(c: Candidate, eager: Candidate | None) -> list[str]:
    speed = f" ({fmt_num(c.speedup_vs_eager)}x eager)" if c.speedup_vs_eager is not None and c.mode != "eager" else ""
    compile_what = "compiles over the stream" if c.stream else "cold compile"
    lines = [f"  {c.setting}: {fmt_num(c.throughput_items_s)} items/s{speed}, "
             f"peak {fmt_num(c.peak_mem_gib)} GiB, {compile_what} {fmt_num(c.compile_s)} s"]
    if c.workload_s is not None:
        vs = ""
        if eager is not None and eager.workload_s is not None and eager is not c:
            vs = f" (eager at batch {eager.batch_size}: {fmt_num(eager.workload_s)} s)"
        lines.append(f"  workload time: {fmt_num(c.workload_s)} s{vs}")
    if c.trial_id:
        lines.append(f"  trial {c.trial_id}")
    return lines


def _exclusions(rec: Recommendation) -> list[str]:
    if not rec.excluded:
        return []
    kinds = Counter(e.kind for e in rec.excluded)
    summary = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    lines = ["", f"Excluded ({len(rec.excluded)}: {summary}):"]
    for e in rec.excluded[:MAX_EXCLUSIONS_SHOWN]:
        lines.append(f"  {e.setting}: {e.reason}")
    if len(rec.excluded) > MAX_EXCLUSIONS_SHOWN:
        lines.append(f"  ... and {len(rec.excluded) - MAX_EXCLUSIONS_SHOWN} more (--json lists all)")
    return lines
