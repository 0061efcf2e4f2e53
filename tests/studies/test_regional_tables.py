"""studies/regional/tables.py: the per-model summary of whole vs regional compilation and of
the Mega-Cache warm start, computed from rows read back from Parquet."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studies.regional import tables as regional_tables
from sweeper.analysis.frames import prepare
from sweeper.results.store import read_results, write_rows


def _row(model: str, mode: str, scope: str, batch: int, compile_s: float | None, tput: float,
         warm_megacache_s: float | None = None, **extra) -> dict:
    return {"sweep_id": "s", "trial_id": f"{model}-{mode}-{scope}-{batch}", "model": model, "mode": mode,
            "scope": scope, "batch_size": batch, "seq_len": 128, "phase": "infer", "precision": "bf16",
            "dynamic": None if mode == "eager" else False, "status": "ok", "device_name": "NVIDIA H200",
            "compile_s": compile_s, "throughput_items_s": tput, "warm_compile_s": None if compile_s is None else 1.0,
            "warm_megacache_s": warm_megacache_s, "megacache_load_s": None if warm_megacache_s is None else 0.5,
            "megacache_bytes": None if compile_s is None else 2**20,
            "compiled_regions": 12 if scope == "regional" else 1,
            "graphs": None if compile_s is None else 1, **extra}


def test_per_model_summary_from_the_rows(tmp_path: Path) -> None:
    rows = [_row("bert-base", "eager", "whole", b, None, 1000.0) for b in (8, 64)]
    rows += [_row("bert-base", "default", "whole", 8, 16.0, 1500.0, 4.5),  # saved 1 - 5/16 = 68.75%
             _row("bert-base", "default", "regional", 8, 4.0, 750.0, 1.5),  # ratio 4x, 0.5x; saved 50%
             _row("bert-base", "default", "whole", 64, 18.0, 9000.0, 5.5),  # saved 66.7%
             _row("bert-base", "default", "regional", 64, 9.0, 8100.0, 3.0),  # 2x, 0.9x; saved 61.1%
             _row("bert-base", "reduce-overhead", "whole", 8, 17.0, 6800.0, 4.0),  # no regional twin
             _row("resnet50", "default", "whole", 8, 30.0, 4000.0),  # one scope only, no artifact timing
             _row("gpt2", "default", "regional", 8, 5.0, 500.0, status="compile_error")]
    write_rows(tmp_path / "results.parquet", rows)
    body = regional_tables.tables(prepare(read_results([tmp_path])))
    # whole: the two paired default trials and reduce-overhead (saved 73.5%); regional: 50% and 61.1%
    assert "| bert-base | 2 | 3x (2-4) | 0.7x (0.5-0.9) | 68.8% (66.7-73.5) | 55.6% (50-61.1) |" in body
    assert "| resnet50 | 0 | - | - | - | - |" in body
    assert "gpt2" not in body.split("## Whole vs regional")[0]  # its one trial failed
    assert "| bert-base | default | 64 | 18 | 9 | 2x | 9,000 | 8,100 | 0.9x | 12 | 1 / 1 |" in body
    assert "| resnet50 | whole | default | 8 | 30 | 1 | — | — | — | 1 |" in body


def test_the_findings_page_table_is_the_committed_rows() -> None:
    from studies import doc_section

    page = regional_tables.PAGE.read_text()
    body = regional_tables.page_body()
    assert "| bert-base | 4 |" in body and "| resnet50 | 4 |" in body
    assert doc_section.extract(page, "regional") == body, "run: python -m studies.regional.tables --write"


def test_a_doc_section_is_replaced_between_its_markers_only() -> None:
    from studies import doc_section

    start, end = doc_section.markers("x")
    text = f"a\n{start}\nold\n{end}\nb {start}\n"
    assert doc_section.extract(doc_section.replace(text, "x", "new\nlines"), "x") == "new\nlines"
    assert doc_section.replace(text, "x", "new").endswith(f"{end}\nb {start}\n")
    with pytest.raises(ValueError, match=re.escape(start)):
        doc_section.replace("no markers", "x", "new")
