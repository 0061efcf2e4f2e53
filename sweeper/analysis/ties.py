"""Which of the compiled settings tied with the fastest one is recommended.

Settings whose times differ by less than their noise are ties (`ranking.tied`): the measurement does
not order them, while their compile times and their `torch.compile` calls differ for sure. So among
the compiled settings tied with the fastest compiled one, the recommendation goes to one whose
compile is within `COMPILE_MARGIN` (or `ranking.COMPILE_FLOOR_S`) of the cheapest tied compile, then
to one without an inductor option set of its own (the mode alone), then to the fastest. A knob that
doubles the compile for a gain inside the noise is not recommended, nor an option set that the mode
alone ties with. Eager at the top stays there: whether compiling pays at all is the verdict's
question (`ranking.verdict`).
"""

from __future__ import annotations

from sweeper.analysis import ranking
from sweeper.analysis.frames import fmt_num
from sweeper.analysis.ranking import COMPILE_FLOOR_S, Candidate

COMPILE_MARGIN = 0.25
"""Tied settings whose compile is within this fraction of the cheapest tied compile count as cheap: one
setting's cold compile spread 6-24% (max - min over median) over three repeats on one H100 host
(studies/decisive/results/h100_same), so only a larger difference counts."""


def tied_with(c: Candidate, lead: Candidate) -> bool:
    return ranking.tied(c.time_s, lead.time_s, max(c.noise_pct, lead.noise_pct))


def costs_more(compile_s: float, than_s: float) -> bool:
    """Whether a compile of `compile_s` is surely dearer than one of `than_s`: beyond COMPILE_MARGIN
    and beyond `ranking.COMPILE_FLOOR_S`."""
    return compile_s > max(than_s * (1 + COMPILE_MARGIN), than_s + COMPILE_FLOOR_S)


def settle(ranked: list[Candidate]) -> list[Candidate]:
    """`ranked` (by `ranking.candidate_key`) with the preferred one of the fastest's ties first."""
    if not ranked or ranked[0].is_eager:
        return ranked
    lead = ranked[0]
    tied = [c for c in ranked if not c.is_eager and tied_with(c, lead)]
    cheapest_s = min(c.compile_s for c in tied)
    cheap = [c for c in tied if not costs_more(c.compile_s, cheapest_s)]
    pick = min(cheap, key=lambda c: (c.own_options, ranking.candidate_key(c)))
    return ranked if pick is lead else [pick] + [c for c in ranked if c is not pick]


def why_passed_over(faster: Candidate, best: Candidate) -> str:
    """Why a setting that measured faster than the choice, inside the noise, ranks below it; '' when
    it did not measure faster or is not tied."""
    if faster.is_eager or not tied_with(faster, best) or not faster.time_s < best.time_s:
        return ""
    noise = max(faster.noise_pct, best.noise_pct)
    gap = 100.0 * (best.time_s / faster.time_s - 1.0)
    if costs_more(faster.compile_s, best.compile_s):
        cost = f"its {faster.compile_what} takes {fmt_num(faster.compile_s)} s against {fmt_num(best.compile_s)} s"
    else:
        cost = "it needs an inductor option set of its own, which the mode alone ties with"
    return (f"{fmt_num(gap)}% faster, inside the measured noise (±{fmt_num(noise)}%), so a tie; {cost}: "
            "among ties the cheaper compile and the plainer call are recommended")
