"""Score heuristic: the hard filters' reasons and their precedence (docs/planners.md §6.3)."""

from __future__ import annotations

import inspect
import re

import numpy as np
from palletizer.core.contracts import HeightMap, PackageSpec
from palletizer.core.planning import (
    DEFAULT_WEIGHTS,
    REJECT_REASONS,
    HeuristicParams,
    ScorePlanner,
)
from palletizer.core.planning.heuristic import RejectReason as ReExported
from palletizer.core.planning.heuristic_candidates import score_candidates
from palletizer.core.planning.heuristic_rejects import EXCLUDED, NOT_REJECTED, RejectReason


def test_the_reasons_are_named_in_precedence_order():
    assert ReExported is RejectReason
    assert [r.value for r in RejectReason] == list(range(len(RejectReason)))
    assert REJECT_REASONS == tuple(r.name for r in RejectReason)
    # docs/planners.md §6.3's table.
    assert REJECT_REASONS == (
        'collision',
        'unobserved',
        'com_unsupported',
        'out_of_reach',
        'max_stack_height',
        'min_support_ratio',
    )
    assert NOT_REJECTED < min(RejectReason)


def test_the_docstring_describes_every_reason_in_precedence_order():
    doc = inspect.cleandoc(RejectReason.__doc__ or '')
    assert 'highest first' in doc
    assert tuple(re.findall(r'^(\w+): ', doc, flags=re.MULTILINE)) == REJECT_REASONS


class _NearHalf:
    """Reachable on the near half of the pallet (x < 0.6 m), or nowhere."""

    def __init__(self, anywhere: bool) -> None:
        self.anywhere = anywhere

    def reachable(self, x, y, z_tcp, yaw):
        return (np.asarray(x) < 0.6) & self.anywhere


def _summary(
    *,
    blind: bool = False,
    allow_unobserved: bool = True,
    cog_x: float = 0.001,
    reach_anywhere: bool = True,
    max_stack_height: float = 1.35,
) -> tuple[dict[str, int], int]:
    """The reject summary (every reason, zeros too) and n_total of a 0.20 m cube on one map.

    Two blocks give collisions beside them, unsupported CoGs and thin support across their
    edges; reach is scored, so it is counted in the precedence, and the far half is out of it.
    Every tenth row and column is low; blind: those cells are unobserved, so every window's
    footprint touches one. cog_x [m]: the CoG's offset along the carton's X (off centre: four
    yaws in every case); 0.5 puts it outside the footprint.
    """
    cells = np.zeros((80, 120))
    cells[10:40, 20:60] = 0.15
    cells[50:70, 80:110] = 0.05
    lattice = np.zeros(cells.shape, dtype=bool)
    lattice[5::10, :] = lattice[:, 5::10] = True
    cells[lattice] = 0.0
    params = HeuristicParams(
        weights=dict(DEFAULT_WEIGHTS, reachability=0.5),
        min_support_ratio=0.9,
        max_stack_height=max_stack_height,
        allow_unobserved=allow_unobserved,
    )
    spec = PackageSpec('p', 'x', (0.20, 0.20, 0.10), 1.0, (cog_x, 0.0, 0.0))
    hm = HeightMap(cells, ~lattice if blind else None)
    c = score_candidates(spec, hm, params, reach=_NearHalf(reach_anywhere))
    return {r: c.reject_summary.get(r, 0) for r in REJECT_REASONS}, c.n_total


def test_a_window_failing_several_filters_counts_under_the_first_in_precedence():
    base, n_total = _summary()
    for r in ('collision', 'com_unsupported', 'out_of_reach', 'min_support_ratio'):
        assert base[r] > 0, r
    # Each case fails every window on one filter: the reasons before it keep their counts, it
    # takes every other window, and the reasons after it count none.
    cases = {
        'unobserved': _summary(blind=True, allow_unobserved=False),
        'com_unsupported': _summary(cog_x=0.5),
        'out_of_reach': _summary(reach_anywhere=False),
        'max_stack_height': _summary(max_stack_height=0.05),
    }
    for failed, (summary, n) in cases.items():
        k = RejectReason[failed]
        before = {r.name: base[r.name] for r in RejectReason if r < k}
        assert n == n_total
        assert summary == {
            **before,
            failed: n_total - sum(before.values()),
            **{r.name: 0 for r in RejectReason if r > k},
        }, failed


def test_a_planner_with_every_slot_excluded_counts_them_under_excluded():
    spec = PackageSpec('b', 'x', (0.40, 0.30, 0.20), 2.0)
    cells = np.full((80, 120), 0.5)
    cells[:40, :50] = 0.0  # one low corner: few windows, all on layer 1
    hm = HeightMap(cells)
    planner = ScorePlanner(HeuristicParams(max_stack_height=0.6))
    cands = planner.candidates(spec, hm, None)
    slots = {f'score-L1-{i}x{j}' for i, j in zip(cands.i0, cands.j0, strict=True)}
    res = planner.choose(spec, hm, None, slots)
    assert res.plan is None and 0 < len(cands.score)
    assert res.reject_summary[EXCLUDED] == len(cands.score)
    assert set(res.reject_summary) <= {*REJECT_REASONS, EXCLUDED}
