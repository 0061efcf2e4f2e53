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
