"""Bucketing policies: the padded length per policy, the model's cap, quantile buckets, refused
policies, padding waste and image epochs."""

from __future__ import annotations

import pytest

from sweeper.spec import bucketing
from sweeper.spec import lengths as workloads
from sweeper.spec.bucketing import pad_length, parse
from sweeper.spec.workload import ImagesSpec


@pytest.mark.parametrize(("text", "n", "expected"), [
    ("none", 37, 37), ("multiple:64", 1, 64), ("multiple:64", 64, 64), ("multiple:64", 65, 128),
    ("pow2", 1, 1), ("pow2", 17, 32), ("pow2", 512, 512), ("list:64,128,256", 100, 128),
    ("list:64,128,256", 256, 256), ("list:64,128,256", 300, 512), ("list:64,128,256", 600, 768),
])
def test_pad_length_per_policy(text: str, n: int, expected: int) -> None:
    assert pad_length(n, parse(text)) == expected


def test_cap_never_pads_past_the_model_but_never_truncates() -> None:
    assert pad_length(400, parse("pow2"), cap=512) == 512
    assert pad_length(500, parse("multiple:96"), cap=512) == 512  # 576 would overflow the positions
    assert pad_length(300, parse("list:64"), cap=256) == 300  # longer than the cap: its own length


def test_quantile_buckets_from_batch_maxima_with_repeated_values() -> None:
    maxima = [512] * 10 + [100, 200]
    assert bucketing.quantile_buckets(maxima, 4) == (512,)  # repeated quantiles merge
    assert bucketing.quantile_buckets([10, 20, 30, 40], 4) == (10, 20, 30, 40)
    assert bucketing.quantile_buckets([10, 20, 30, 40], 2) == (20, 40)
    assert bucketing.quantile_buckets([10, 10, 10], 8) == (10,)
    assert bucketing.plan([10, 15, 30, 40], "quantile:2") == [15, 15, 40, 40]  # buckets are observed maxima
    assert bucketing.plan([7], "quantile:3") == [7]


@pytest.mark.parametrize(("text", "message"), [
    ("multiple:0", "positive integer"), ("multiple", "write multiple:N"), ("list:", "bucket lengths"),
    ("list:128,64", "strictly increasing"), ("list:64,64", "strictly increasing"), ("quantile:x", "K must be"),
    ("pow2:2", "takes no argument"), ("buckets", "unknown bucketing"),
])
def test_bad_policies_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_token_plan_and_padding_waste() -> None:
    plan = workloads.token_plan([3, 5, 8, 2, 9, 9], 2, "multiple:4")
    assert plan == [([3, 5], 8), ([8, 2], 8), ([9, 9], 12)]
    real, computed = sum(sum(c) for c, _ in plan), sum(len(c) * pad for c, pad in plan)
    assert (real, computed) == (36, 56) and workloads.pad_waste(real, computed) == pytest.approx(1 - 36 / 56)
    assert workloads.pad_waste(8, 8) == 0.0  # [4, 4] padded to 4: no padding
    assert workloads.pad_waste(0, 0) is None and workloads.pad_waste(None, 64) is None  # empty; images


def test_image_epoch_has_a_partial_last_batch_and_seeded_resolutions() -> None:
    assert workloads.image_plan(ImagesSpec(dataset_size=10), 4, seed=0) == [[4, None], [4, None], [2, None]]
    plan = workloads.image_plan(ImagesSpec(dataset_size=100, resolutions=[32, 48]), 8, seed=5)
    assert [n for n, _ in plan] == [8] * 12 + [4]
    assert {s for _, s in plan} == {32, 48}
    assert plan == workloads.image_plan(ImagesSpec(dataset_size=100, resolutions=[32, 48]), 8, seed=5)
