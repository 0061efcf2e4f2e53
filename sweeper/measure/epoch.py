"""Seconds per epoch of N images or sequences, compile excluded and included, from a measured
row: what published "s/epoch" figures compare with. N comes from the spec (`measure.epoch_images`
for vision models, `measure.epoch_sequences` for NLP models), else from the trial's stream."""

from __future__ import annotations

from typing import Any

from sweeper.spec.trials import Trial


def epoch_items(trial: Trial) -> int | None:
    """Items in one epoch: the spec's figure for the trial's task, else its stream's items."""
    m = trial.measure
    n = {"vision": m.epoch_images, "nlp": m.epoch_sequences}.get(trial.task)
    if n is None and trial.workload is not None:
        w = trial.workload
        n = sum(items for items, _ in w.images) if w.images is not None else len(w.lengths or [])
    return n or None


def epoch_columns(trial: Trial, row: dict[str, Any]) -> dict[str, Any]:
    """The epoch columns of a row that has a steady throughput; none otherwise. Compile included
    adds the compile the first epoch pays: `compile_s`, or a stream's every compile."""
    n, throughput = epoch_items(trial), row.get("throughput_items_s")
    if n is None or not throughput:
        return {}
    epoch_s = n / throughput
    compile_s = row.get("stream_compile_s" if trial.workload is not None else "compile_s") or 0.0
    eager = row.get("eager_throughput_items_s")
    return {"epoch_items": n, "epoch_s": epoch_s, "epoch_s_with_compile": epoch_s + compile_s,
            "eager_epoch_s": n / eager if eager else None}
