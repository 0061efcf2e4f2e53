"""Rank phase-generate settings for a serving workload: R requests of P prompt tokens and N new tokens
(`sweeper recommend --workload RxP+N`, e.g. 1000x128+256).

Each candidate is an ok, accurate generate row of prompt length P. It serves the requests in calls of
its batch size B: ceil(R / B) generate calls, each its time to first token (the prefill) plus N - 1
decode steps at its measured step time (B / decode_tokens_per_s), with its compile (compile_s) paid
once. The rank is that total; each request's own latency (first token, and the whole answer) is
given beside it, so a chat-like workload (few requests, batch 1) and a batch-like one (many requests,
large batches) are answered from the same rows. When the rows decoded fewer or more than N tokens,
their step time is taken as it was measured, and the answer says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from sweeper import SweeperError

WORKLOAD_RE = re.compile(r"^(\d+)x(\d+)\+(\d+)$")


class GenerateWorkloadError(SweeperError):
    """No generate rows that can answer the workload asked."""


@dataclass(frozen=True)
class GenerateWorkload:
    requests: int
    prompt_tokens: int
    new_tokens: int

    @classmethod
    def parse(cls, text: str | None) -> GenerateWorkload | None:
        """`RxP+N`, or None when the text is not of that form (a stream's name)."""
        match = WORKLOAD_RE.match(text or "")
        if not match:
            return None
        requests, prompt, new = (int(g) for g in match.groups())
        if min(requests, prompt, new) < 1:
            raise GenerateWorkloadError(f"workload {text!r}: requests, prompt and new tokens must be at least 1")
        return cls(requests, prompt, new)

    def __str__(self) -> str:
        return f"{self.requests} requests of {self.prompt_tokens} prompt tokens and {self.new_tokens} new tokens"


@dataclass(frozen=True)
class Served:
    """One setting serving the workload."""

    setting: str
    trial_id: str
    total_s: float
    compile_s: float
    calls: int
    ttft_ms: float
    decode_tokens_per_s: float
    request_s: float
    """One request's whole answer: first token plus N - 1 decode steps."""
    measured_new_tokens: int | None


def _setting(r: dict) -> str:
    dyn = "" if r["mode"] == "eager" else f" dynamic={r['dynamic']}"
    return f"{r['mode']}{dyn} cache={r['cache']} batch {int(r['batch_size'])}"


def serve(r: dict, w: GenerateWorkload) -> Served:
    batch = int(r["batch_size"])
    step_s = batch / r["decode_tokens_per_s"]
    compile_s = 0.0 if r["mode"] == "eager" or pd.isna(r.get("compile_s")) else float(r["compile_s"])
    request_s = r["ttft_ms"] / 1e3 + (w.new_tokens - 1) * step_s
    calls = math.ceil(w.requests / batch)
    new = r.get("new_tokens")
    return Served(_setting(r), r["trial_id"], compile_s + calls * request_s, compile_s, calls, float(r["ttft_ms"]),
                  float(r["decode_tokens_per_s"]), request_s, None if pd.isna(new) else int(new))


def rank(df: pd.DataFrame, w: GenerateWorkload, max_memory_gib: float | None = None,
         max_compile_s: float | None = None) -> dict[tuple[str, str, str], list[Served]]:
    """Per (model, precision, device): the settings that qualify, fastest total first."""
    rows = df[df["phase"].eq("generate")] if "phase" in df else df.iloc[0:0]
    if rows.empty:
        raise GenerateWorkloadError("no phase generate rows in these results")
    prompts = sorted({int(p) for p in rows["seq_len"].dropna()})
    rows = rows[rows["seq_len"].eq(w.prompt_tokens) & rows["status"].eq("ok")
                & rows["decode_tokens_per_s"].notna() & rows["ttft_ms"].notna()]
    if max_memory_gib is not None:
        rows = rows[rows["peak_mem_compile_gib"].fillna(0) <= max_memory_gib]
    if max_compile_s is not None:
        rows = rows[rows["compile_s"].fillna(0) <= max_compile_s]
    if rows.empty:
        raise GenerateWorkloadError(f"no ok generate rows with a {w.prompt_tokens}-token prompt within the limits; "
                                    f"prompts measured: {', '.join(map(str, prompts)) or 'none'}")
    out: dict[tuple[str, str, str], list[Served]] = {}
    for key, group in rows.groupby(["model", "precision", "device_name"], dropna=False, sort=True):
        out[tuple(str(k) for k in key)] = sorted((serve(r, w) for r in group.to_dict("records")),
                                                 key=lambda s: s.total_s)
    return out


def render(w: GenerateWorkload, ranked: dict[tuple[str, str, str], list[Served]]) -> str:
    lines = [f"workload: {w}"]
    for (model, precision, device), served in ranked.items():
        best, width = served[0], max(len("setting"), *(len(s.setting) for s in served))
        lines += ["", f"{model} · {precision} · {device}: use {best.setting} ({best.total_s:.1f} s in all)",
                  f"  {'setting':<{width}} {'total s':>9} {'compile s':>9} {'ttft ms':>9} {'decode tok/s':>12} "
                  f"{'request s':>9}"]
        lines += [f"  {s.setting:<{width}} {s.total_s:>9.2f} {s.compile_s:>9.2f} {s.ttft_ms:>9.2f} "
                  f"{s.decode_tokens_per_s:>12.1f} {s.request_s:>9.3f}" for s in served]
        measured = {s.measured_new_tokens for s in served} - {w.new_tokens}
        if measured:
            lines.append(f"  decode steps timed over {', '.join(map(str, sorted(measured)))} new tokens, taken "
                         f"as they were measured for {w.new_tokens}")
    return "\n".join(lines)
