"""`sweeper prices` on the knobs study's committed H100 rows (run 5): a line per option set against the
`default` set of its setting, and each failed aoti trial with its option set and its whole error, the
load crash's cause (the library and the compiler that built it) included."""

from __future__ import annotations

import json

from tests.helpers import REPO, run_cli

RUN5 = REPO / "studies/knobs/results/run5"


def test_prices_prints_each_option_set_and_each_failed_aoti_trial_whole(capsys):
    assert run_cli(["prices", str(RUN5 / "knobs_resnet50"), str(RUN5 / "aoti")]) == 0
    out = capsys.readouterr().out.splitlines()
    prices = [line for line in out if " jit " in line]
    assert len(prices) == 10  # five sets against the default set, under two modes
    assert ("  resnet50 default bs64 jit cdt: throughput +0.5% [-3.4, +4.6], cold compile 22.7 s vs 9.76 s "
            "(+132.6%), warm +360.8%: a tie; cold compile +133%") in prices
    failed = [line for line in out if line.startswith("  aoti ")]
    assert len(failed) == 6 and sum(" freezing: crashed: " in line for line in failed) == 3
    assert all(line.endswith("carries its own libstdc++ (linked in statically by the C++ compiler inductor "
                             "called, /opt/gcc/bin/g++) beside torch's: build with CXX set to a compiler that "
                             "links libstdc++ dynamically") for line in failed)


def test_prices_json_holds_the_same_tables(capsys):
    assert run_cli(["prices", str(RUN5 / "knobs_vit_b_16"), str(RUN5 / "aoti"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(p["option_set"] for p in doc["prices"]) == ["cdt", "combo", "freezing", "no_epilogue", "no_padding"]
    assert len(doc["aoti_failed"]) == 6 and doc["deploy"] == []


RUN6 = REPO / "studies/knobs/results/run6"


def test_the_deployment_table_of_run6_is_what_prices_prints_from_its_rows(capsys):
    """The study's first-call table (results/run6/README.md): JIT cold, JIT from the Mega-Cache
    artifact, and the AOTI package's CPU check, load and first call, per model."""
    dirs = [RUN5 / "knobs_resnet50", RUN5 / "knobs_vit_b_16", RUN6 / "knobs_gpt2", RUN6 / "knobs_vit_ro", RUN6 / "aoti"]
    assert run_cli(["prices", *map(str, dirs)]) == 0
    out = capsys.readouterr().out
    readme = (RUN6 / "README.md").read_text()
    table = out[out.index("first call of a deployment"):].splitlines()[1:]
    assert table == [
        "  gpt2 default bs64 default: 6.48 | 2.37 | 26.8 (39.6 s, 499 MB); speedup jit 1.15x, aoti 1.15x",
        "  resnet50 default bs64 default: 9.76 | 2.48 | 26.4 (41.2 s, 104 MB); speedup jit 1.97x, aoti 1.97x",
        "  vit_b_16 default bs64 default: 9.24 | 2.31 | 26.5 (39.7 s, 348 MB); speedup jit 0.972x, aoti 0.977x"]
    for line in table:  # the README's table row: "| MODEL ... | 6.48 | 2.37 | 26.8 (39.6 s, 499 MB) |"
        jit, mega, aoti = line.split(": ", 1)[1].split(";")[0].split(" | ")
        assert f"| {jit} | {mega} | {aoti} |" in readme, line
    assert sum(" bs64 jit " in line for line in out.splitlines()) == 30  # 3 models x 2 modes x 5 sets
