"""A trial's inductor options as torch.compile takes them.

torch.compile refuses `mode` and `options` together, so a trial with a non-empty option set gets
its mode's own options (`torch._inductor.list_mode_options`) with the set over them, and no mode.
The row records exactly what was applied (`inductor_options_json`); an empty set leaves the call
as it was (the mode alone), so a spec's default set measures plain torch.compile.
"""

from __future__ import annotations

import json
from typing import Any

import torch._inductor

from sweeper.spec.trials import Trial

AOTI_LEAVES_OUT = ("triton.cudagraphs",)
"""Mode options an AOTInductor package has no use for: it runs without CUDA graphs."""


def unknown_keys(trial: Trial) -> list[str]:
    """The set's keys this torch's inductor config does not have (torch.compile would refuse them
    with the list of every option it knows)."""
    import torch._inductor.config as config

    known = config.get_config_copy()
    return [k for k in trial.options if k not in known]


def merged(trial: Trial) -> dict[str, Any]:
    """The mode's options with the trial's set over them (empty when the set is empty)."""
    if not trial.options:
        return {}
    found = dict(torch._inductor.list_mode_options(trial.mode, trial.dynamic))
    return {**found, **trial.options}


def compile_kwargs(trial: Trial) -> dict[str, Any]:
    """`mode=` or `options=` for torch.compile with the inductor backend."""
    options = merged(trial)
    return {"options": options} if options else {"mode": trial.mode}


def aoti_configs(trial: Trial) -> dict[str, Any]:
    """The inductor configs of an AOTInductor build: the mode's and the set's, CUDA graphs left out."""
    found = {**torch._inductor.list_mode_options(trial.mode, trial.dynamic), **trial.options}
    return {k: v for k, v in found.items() if k not in AOTI_LEAVES_OUT}


def options_row(trial: Trial) -> dict[str, Any]:
    """The row's record of the applied options (null: the mode alone, or eager)."""
    if trial.mode == "eager":
        return {}
    applied = aoti_configs(trial) if trial.path == "aoti" else merged(trial)
    return {"inductor_options_json": json.dumps(applied, sort_keys=True)} if applied or trial.path == "aoti" else {}
