"""Plain-text rendering of recommendations for `sweeper recommend` in a terminal: one context in
full, or one line per context as a table."""

from __future__ import annotations

from collections import Counter

from sweeper.analysis.frames import fmt_num
from sweeper.analysis.ranking import Candidate, context_label
from sweeper.analysis.recommend import Recommendation

MAX_EXCLUSIONS_SHOWN = 12


def render(rec: Recommendation) -> str:
    where = context_label(rec.context).replace(" · ", " / ")
    lines = [f"{rec.context['model']}" + (f" ({where})" if where else ""), f"  workload: {rec.workload_note}"]
    limits = _limits(rec.constraints)
    if limits:
        lines.append(f"  limits: {limits}")
    lines.append("")
    if rec.best is None:
        lines.append("No setting meets the constraints.")
    else:
        lines += [f"Recommendation: {rec.advice}", *_describe(rec.best, rec.eager), f"  verdict: {rec.verdict}"]
    if rec.runner_up is not None:
        lines += ["", f"Runner-up: {rec.runner_up.setting}  [{rec.runner_up.compile_call}]",
                  *_describe(rec.runner_up, rec.eager), f"  lost: {rec.runner_up_reason}"]
    if rec.ties:
        names = "; ".join(c.setting for c in rec.ties[:MAX_EXCLUSIONS_SHOWN])
        more = f"; and {len(rec.ties) - MAX_EXCLUSIONS_SHOWN} more" if len(rec.ties) > MAX_EXCLUSIONS_SHOWN else ""
        lines += ["", f"Tied with the recommendation within the measured noise ({len(rec.ties)}): {names}{more}"]
    lines += _exclusions(rec)
    return "\n".join(lines)


def _limits(constraints: dict[str, object]) -> str:
    parts = []
    if constraints.get("max_memory_gib") is not None:
        parts.append(f"peak memory <= {fmt_num(constraints['max_memory_gib'])} GiB")
    if constraints.get("max_compile_s") is not None:
        what = "compile (warm start where measured)" if constraints.get("warm_start") else "cold compile"
        parts.append(f"{what} <= {fmt_num(constraints['max_compile_s'])} s")
    if constraints.get("batch_size") is not None:
        parts.append(f"batch {constraints['batch_size']}")
    return ", ".join(parts)


def _describe(c: Candidate, eager: Candidate | None) -> list[str]:
    speed = f" ({fmt_num(c.speedup_vs_eager)}x eager)" if c.speedup_vs_eager is not None and c.mode != "eager" else ""
    compile_what = c.compile_what
    steady = (f" (steady {fmt_num(c.steady_peak_mem_gib)})" if c.steady_peak_mem_gib is not None
              and c.steady_peak_mem_gib != c.peak_mem_gib else "")
    lines = [f"  {c.setting}: {fmt_num(c.throughput_items_s)} items/s{speed}, "
             f"peak {fmt_num(c.peak_mem_gib)} GiB{steady}, {compile_what} {fmt_num(c.compile_s)} s"]
    lines += [f"  {note}" for note in (c.speedup_note, c.host_note) if note]
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


TABLE_HEADERS = ["model", "context", "recommendation", "setting", "items/s", "speedup", "peak GiB",
                 "compile s", "verdict"]


def render_table(recs: list[Recommendation]) -> str:
    """One line per context: the choice, its numbers and the verdict (with why a speedup is unsure)."""
    body = [[r.context["model"], context_label(r.context) or "-", *_table_cells(r.best), r.verdict]
            for r in recs]
    widths = [max(len(h), *(len(line[i]) for line in body)) for i, h in enumerate(TABLE_HEADERS)]
    out = ["  ".join(h.ljust(w) for h, w in zip(TABLE_HEADERS, widths, strict=True)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in body]
    notes = [f"{r.context['model']} ({context_label(r.context)}): {r.best.speedup_note}"
             for r in recs if r.best is not None and r.best.speedup_note]
    return "\n".join(out + (["", *notes] if notes else []))


def _table_cells(c: Candidate | None) -> list[str]:
    if c is None:
        return ["no setting meets the constraints", "-", "-", "-", "-", "-"]
    speed = "-" if c.is_eager else f"{fmt_num(c.speedup_vs_eager)}x"
    return [c.compile_call, c.setting, fmt_num(c.throughput_items_s), speed, fmt_num(c.peak_mem_gib),
            fmt_num(c.compile_s)]
