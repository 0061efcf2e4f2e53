"""benchmarks/model_build.py's check that a model built on the device is the same model: on the CPU,
with two real draws of the same initializations."""

from __future__ import annotations

import torch
from torch import nn

from benchmarks import model_build


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(256, 512), nn.LayerNorm(512), nn.Linear(512, 256))
    for layer in (net[0], net[2]):
        nn.init.trunc_normal_(layer.weight, std=0.02)
    return net


def test_two_draws_of_one_initialization_are_the_same_model():
    assert model_build.same_model(_net(0), _net(1), torch.device("cpu"), z_max=6.0) == []


def test_one_value_on_the_bounds_is_named_apart_and_leaves_the_spread_check_alone():
    host, dev = _net(0), _net(1)
    with torch.no_grad():
        host[0].weight[3, 7] = 2.0  # what torch 2.11's trunc_normal_ can put on its bound
    problems = model_build.same_model(host, dev, torch.device("cpu"), z_max=6.0)
    assert problems == ["0.weight: 1 values beyond 20 standard deviations on the host, 0 on the device"]


def test_another_initialization_is_a_spread_problem():
    host, dev = _net(0), _net(1)
    with torch.no_grad():
        dev[2].weight.mul_(1.05)
    (problem,) = model_build.same_model(host, dev, torch.device("cpu"), z_max=6.0)
    assert problem.startswith("2.weight (131072 values): mean/std")
    host, dev = _net(0), _net(1)
    with torch.no_grad():
        dev[1].weight.fill_(0.5)  # a constant tensor that differs
    assert model_build.same_model(host, dev, torch.device("cpu"), z_max=6.0) == [
        "1.weight: constant or integer tensor differs"]
