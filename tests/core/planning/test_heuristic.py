"""Score heuristic: the reference planner checks and the vectorised terms.

The checks: docs/planners.md §6.9. Why one file of this length: the checks share the stacking
fixtures (tests/core/planning/_stacking.py) and the map builders here; the reject reasons have
their own tests (test_heuristic_rejects.py).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from palletizer.core.contracts import HeightMap, PackageSpec, PalletState, Placement, PlacementPlan
from palletizer.core.planning import (
    DEFAULT_WEIGHTS,
    REJECT_REASONS,
    TERMS,
    HeuristicParams,
    ScorePlanner,
)
from palletizer.core.planning.heuristic import score_candidates

from ._stacking import SMALL, assert_tcp_asked_and_in_disc, corner_map

STD_M = PackageSpec('std_m-00', 'std_m', (0.42, 0.30, 0.18), 4.2)


def _params(**over) -> HeuristicParams:
    """Reference placing defaults: pallet_com off (it pulls to the centre)."""
    weights = dict(DEFAULT_WEIGHTS, pallet_com=0.0)
    weights.update(over.pop('weights', {}))
    return HeuristicParams(weights=weights, **over)


def _map(cells) -> HeightMap:
    return HeightMap(np.asarray(cells, dtype=float))


def test_empty_pallet_takes_the_corner():
    res = ScorePlanner(_params()).choose(STD_M, HeightMap.flat(), None)
    plan = res.plan
    assert plan is not None and res.reject_summary == {}
    assert plan.yaw == 0.0 and plan.layer == 1 and plan.slot == 'score-L1-0x0'
    np.testing.assert_allclose(plan.position, (0.21, -0.25, 0.144 + 0.09), atol=1e-12)
    assert plan.predicted_support == 1.0
    assert plan.breakdown['gap_waste'] == 1.0 and plan.breakdown['support_ratio'] == 1.0


def test_a_notch_beats_a_plateau():
    cells = np.full((80, 120), 0.24)
    cells[:, :34] = 0.12  # a 0.34 m wide notch, 0.12 deep, along the -x rim
    spec = PackageSpec('b', 'small', (0.30, 0.22, 0.12), 1.8)
    plan = ScorePlanner(_params()).choose(spec, _map(cells), None).plan
    assert plan is not None
    np.testing.assert_allclose(plan.position[2] - 0.144, 0.12 + 0.06)
    assert plan.position[0] < 0.34


def _pocket(cells_support) -> np.ndarray:
    """A 0.55 m high wall everywhere except a 0.50 x 0.40 pocket at the (-x, -y) corner."""
    cells = np.full((80, 120), 0.55)
    cells[:40, :50] = 0.0
    for c0, c1 in cells_support:
        cells[:40, c0:c1] = 0.2
    return cells


def test_a_bridge_is_allowed_and_rewarded():
    # Two equal neighbours with a 0.10 m gap; the wall's top is out of bounds (cap 0.6 m).
    cells = _pocket([(0, 20), (30, 50)])
    spec = PackageSpec('c', 'bridge', (0.42, 0.30, 0.10), 3.0)
    res = ScorePlanner(_params(max_stack_height=0.6)).choose(spec, _map(cells), None)
    plan = res.plan
    assert plan is not None
    assert plan.breakdown['bridge'] > 0.5
    assert plan.breakdown['com_margin'] > 0.0
    np.testing.assert_allclose(plan.position[2] - 0.144, 0.2 + 0.05)
    # Where the box crosses the gap the CoG has air under it, yet it is supported (the extent).
    assert plan.position[0] - 0.21 < 0.20 < plan.position[0] + 0.21


def test_a_cantilever_is_rejected():
    # One neighbour only: the box would hang its CoG over air.
    cells = _pocket([(0, 20)])
    spec = PackageSpec('c', 'lever', (0.42, 0.30, 0.10), 3.0)
    params = _params(max_stack_height=0.6, min_support_ratio=0.3)
    res = ScorePlanner(params).choose(spec, _map(cells), None)
    assert res.plan is None
    assert res.reject_summary['com_unsupported'] > 0


def test_same_input_gives_the_same_pick():
    rng = np.random.default_rng(11)
    cells = np.zeros((80, 120))
    for _ in range(6):
        j, i = rng.integers(0, 60), rng.integers(0, 90)
        cells[j : j + 20, i : i + 30] = rng.choice([0.12, 0.18, 0.24])
    spec = PackageSpec('d', 'std_s', (0.38, 0.28, 0.16), 3.5, (0.02, 0.02, -0.015))
    a = ScorePlanner(_params()).choose(spec, _map(cells), None)
    b = ScorePlanner(_params()).choose(spec, _map(cells.copy()), None)
    assert a == b and a.plan is not None


def test_no_fit_is_a_result_not_a_crash():
    tall = PackageSpec('t', 'tall', (0.3, 0.2, 0.5), 2.0)
    cells = np.full((80, 120), 0.9)
    planner = ScorePlanner(_params())
    res = planner.choose(tall, _map(cells), None)
    assert res.plan is None and 'max_stack_height' in res.reject_summary
    cands = planner.candidates(tall, _map(cells), None)
    assert sum(res.reject_summary.values()) == cands.n_total > 0
    huge = PackageSpec('h', 'huge', (1.3, 0.9, 0.2), 5.0)
    res = planner.choose(huge, HeightMap.flat(), None)
    assert res.plan is None and res.reject_summary == {}


def test_non_finite_cells_are_treated_as_unobserved():
    cells = np.zeros((80, 120))
    cells[:, :50] = np.nan  # the sensor saw nothing there
    cells[0, 119] = np.inf
    hm = _map(cells)
    assert not hm.observed[:, :50].any()
    res = ScorePlanner(_params()).choose(STD_M, hm, None)
    assert res.plan is not None and all(math.isfinite(v) for v in res.plan.breakdown.values())
    strict = ScorePlanner(_params(allow_unobserved=False)).choose(STD_M, hm, None)
    assert strict.plan is not None and strict.reject_summary['unobserved'] > 0
    # The footprint plus its clearance ring stays clear of the blind band (x < 0.50 m) and cell.
    assert strict.plan.position[0] - 0.21 - 0.04 >= 0.50 - 1e-9


def test_replan_with_an_excluded_slot_returns_the_next_best_without_re_enumerating():
    planner = ScorePlanner(_params())
    hm = HeightMap.flat()
    first = planner.choose(STD_M, hm, None).plan
    assert planner.enumerations == 1
    cands = planner.candidates(STD_M, hm, None)
    second = planner.choose(STD_M, hm, None, excluded_slots={first.slot}).plan
    assert planner.enumerations == 1
    assert second.slot != first.slot and second.score <= first.score
    # It is the best-ranked candidate with a different slot name.
    k = next(
        k for k in range(len(cands.score)) if f'score-L1-{cands.i0[k]}x{cands.j0[k]}' != first.slot
    )
    np.testing.assert_allclose(second.position[:2], (cands.x[k], cands.y[k]))
    # A new map is a new enumeration.
    cells = np.zeros((80, 120))
    cells[:30, :44] = 0.18
    planner.choose(STD_M, _map(cells), None)
    assert planner.enumerations == 2


def test_an_excluded_slot_excludes_its_layers_windows_within_the_radius():
    from ._stacking import corner_map

    hm = corner_map(60, 36)  # a strip one carton wide: windows slide along it
    plain = ScorePlanner(_params())
    first = plain.choose(STD_M, hm, None).plan
    cands = plain.candidates(STD_M, hm, None)
    corners = [(int(i), int(j)) for i, j in zip(cands.i0, cands.j0, strict=True)]
    i0, j0 = corners[0]
    assert first.slot == f'score-L1-{i0}x{j0}'

    def first_beyond(radius: int) -> int:
        return next(
            k for k, (i, j) in enumerate(corners) if max(abs(i - i0), abs(j - j0)) > radius
        )

    # Without a radius the replan takes the next window in rank order: a neighbour here.
    k0 = first_beyond(0)
    assert max(abs(corners[k0][0] - i0), abs(corners[k0][1] - j0)) <= 3
    got = plain.choose(STD_M, hm, None, excluded_slots={first.slot}).plan
    np.testing.assert_allclose(got.position[:2], (cands.x[k0], cands.y[k0]))
    # With a radius of 3 cells it walks off that neighbourhood.
    planner = ScorePlanner(_params(exclude_radius=3))
    got = planner.choose(STD_M, hm, None, excluded_slots={first.slot}).plan
    k3 = first_beyond(3)
    assert k3 > k0
    np.testing.assert_allclose(got.position[:2], (cands.x[k3], cands.y[k3]))
    # Names that are not the heuristic's own exclude nothing else.
    other = planner.choose(STD_M, hm, None, excluded_slots={'beam-L1-0x0r0'}).plan
    assert other.slot == first.slot
    from palletizer.core.errors import PalletizerError

    with pytest.raises(PalletizerError, match='exclude_radius'):
        HeuristicParams(exclude_radius=-1)


def test_every_term_and_score_is_bounded():
    rng = np.random.default_rng(5)
    cells = np.zeros((80, 120))
    for _ in range(8):
        j, i = rng.integers(0, 60), rng.integers(0, 90)
        cells[j : j + 25, i : i + 35] += rng.choice([0.10, 0.16, 0.22])
    spec = PackageSpec('e', 'x', (0.30, 0.22, 0.12), 1.8, (0.025, 0.0, 0.0))
    c = score_candidates(spec, _map(cells), HeuristicParams(), pallet_mass=10.0)
    assert len(c.score) > 100
    assert np.all((c.terms >= 0) & (c.terms <= 1)) and np.all((c.score >= 0) & (c.score <= 1))
    assert set(c.reject_summary) <= set(REJECT_REASONS)


def test_an_off_centre_cog_gets_the_half_turns():
    centred = score_candidates(STD_M, HeightMap.flat(), _params())
    assert set(np.round(np.degrees(centred.yaw))) == {0.0, 90.0}
    off = PackageSpec('o', 'std_m', (0.42, 0.30, 0.18), 4.2, (0.05, 0.0, 0.0))
    flipped = score_candidates(off, HeightMap.flat(), _params())
    assert set(np.round(np.degrees(flipped.yaw))) == {0.0, 90.0, 180.0, 270.0}


def test_a_neighbour_inside_the_clearance_band_collides():
    spec = PackageSpec('s', 'x', (0.30, 0.20, 0.10), 1.0)
    cells = np.zeros((80, 120))
    cells[:, 34:] = 0.3  # a wall from x = 0.34 m
    c = score_candidates(spec, _map(cells), _params())
    # Along the -x rim with yaw 0 (30 cells), four cells of clearance fit exactly: i0 = 0 only.
    yaw0 = c.yaw == 0.0
    low = c.z_base == 0.0
    assert set(c.i0[yaw0 & low]) == {0}
    cells[:, 33] = 0.3  # one cell closer: the ring now touches the wall
    c = score_candidates(spec, _map(cells), _params())
    assert not np.any((c.yaw == 0.0) & (c.z_base == 0.0))
    assert c.reject_summary['collision'] > 0


def test_pallet_com_leaves_the_first_box_free_and_pulls_the_next_to_balance_the_load():
    """On an empty deck the stack's CoG would be the carton's own: pallet_com reads 1 for every
    window (the reference pulled the first box to the deck's centre, which split the deck in
    two; level 16 through physics failed 9 of the 23 seeds whose first carton went there).
    With load on the pallet it pulls the new box to where the stack's CoG comes to the centre.
    """
    only = {t: 0.0 for t in TERMS} | {'pallet_com': 1.0}
    params = HeuristicParams(weights=only)
    col = TERMS.index('pallet_com')
    first = score_candidates(STD_M, HeightMap.flat(), params)
    assert len(first.score) > 0
    np.testing.assert_array_equal(first.terms[:, col], 1.0)
    # 8.4 kg stand 0.25 m towards -x (pallet frame): the 4.2 kg box balances it at +0.5 m.
    loaded = score_candidates(
        STD_M, HeightMap.flat(), params, pallet_mass=8.4, pallet_cog=(-0.25, 0.0, 0.1)
    )
    assert loaded.terms[:, col].min() < 0.7
    # As far as the deck lets it: its 0.30 m side along x, flush with the +x edge, centred.
    x, y = loaded.x[0] - 0.6, loaded.y[0]
    np.testing.assert_allclose((x, y, loaded.yaw[0]), (0.45, 0.0, np.pi / 2), atol=0.011)
    plan = ScorePlanner(params).choose(STD_M, HeightMap.flat(), None).plan
    assert plan is not None  # ties: the lowest y, then x: a corner, not the centre
    assert abs(plan.position[0] - 0.60) > 0.3


def test_a_zero_weight_turns_a_term_off():
    only = {t: 0.0 for t in TERMS} | {'support_ratio': 2.0}
    rng = np.random.default_rng(2)
    cells = np.where(rng.uniform(size=(80, 120)) < 0.02, 0.05, 0.0)
    c = score_candidates(STD_M, _map(cells), HeuristicParams(weights=only, min_support_ratio=0))
    np.testing.assert_allclose(c.score, c.terms[:, TERMS.index('support_ratio')])


def _record(planner: ScorePlanner, spec: PackageSpec, x: float, y: float, z_base: float) -> None:
    pose = (x - 0.6, y, z_base + spec.dims_m[2] / 2, 0.0)
    planner.record(
        Placement(0, spec.package_id, spec.type_name, spec.mass_kg, spec.dims_m, 1, pose, pose,
                  0.0, 0.0, 1.0, 0.0, True)
    )  # fmt: skip


def test_layer_comes_from_recorded_measured_bases():
    planner = ScorePlanner(_params())
    _record(planner, STD_M, 0.21, -0.25, 0.0)
    _record(planner, STD_M, 0.70, -0.25, 0.002)  # same layer within 3 mm
    cells = np.full((80, 120), 0.18)
    plan = planner.choose(STD_M, _map(cells), None).plan
    assert plan.layer == 2 and plan.slot.startswith('score-L2-')
    assert planner.book.mass == pytest.approx(8.4)


class _DiscReach:
    """Reachable inside an annulus around the robot base and below a TCP height."""

    def __init__(self, z_max: float) -> None:
        self.z_max = z_max
        self.calls = 0

    def reachable(self, x, y, z_tcp, yaw):
        self.calls += 1
        d = np.hypot(x - 0.60, y + 0.72)
        return (d >= 0.45) & (d <= 1.0) & (z_tcp <= self.z_max)


def test_reach_is_a_hard_filter_and_sets_the_height_limit():
    reach = _DiscReach(z_max=0.144 + 0.40)
    planner = ScorePlanner(_params(weights={'reachability': 1.0}), reach=reach)
    res = planner.choose(STD_M, HeightMap.flat(), None)
    assert reach.calls == 2  # one vectorised batch per yaw
    assert res.reject_summary['out_of_reach'] > 0
    x, y = res.plan.position[:2]
    assert 0.45 + 0.02 <= math.hypot(x - 0.6, y + 0.72) <= 1.0 - 0.02
    assert res.plan.breakdown['reachability'] == 1.0
    # A plateau whose top puts the TCP above the reachable height: nothing is valid, and the
    # reason is reach, not a fixed stack-height cap.
    res = planner.choose(STD_M, _map(np.full((80, 120), 0.25)), None)
    assert res.plan is None and 'max_stack_height' not in res.reject_summary
    assert res.reject_summary['out_of_reach'] > 0


def test_planner_rejects_a_finer_map_it_cannot_pool():
    hm = HeightMap(np.zeros((107, 160)), None, (0.0, -0.4), 0.0075)
    with pytest.raises(Exception, match='cell_size = 0.0075'):
        ScorePlanner(_params()).choose(STD_M, hm, None)
    fine = HeightMap(np.zeros((160, 240)), None, (0.0, -0.4), 0.005)
    assert ScorePlanner(_params()).choose(STD_M, fine, None).plan.slot == 'score-L1-0x0'


# ---------------------------------------------------------------------------------------------
# The vectorised terms against a cell-by-cell reading of their definitions.


def _brute(h: np.ndarray, i0: int, j0: int, fx: int, fy: int, H: float, p: HeuristicParams):
    tol, cell = p.support_tol, 0.01
    win = h[j0 : j0 + fy, i0 : i0 + fx]
    zb = win.max()
    sup = win >= zb - tol
    new = h.copy()
    new[j0 : j0 + fy, i0 : i0 + fx] = zb + H
    void = (zb - win).sum() / win.size
    ny, nx = h.shape

    def seam(side):
        if side == 'l':
            return (
                None if i0 == 0 else np.mean(h[j0 : j0 + fy, i0] - h[j0 : j0 + fy, i0 - 1] > tol)
            )
        if side == 'r':
            e = i0 + fx - 1
            return (
                None if e == nx - 1 else np.mean(h[j0 : j0 + fy, e] - h[j0 : j0 + fy, e + 1] > tol)
            )
        if side == 'd':
            return (
                None if j0 == 0 else np.mean(h[j0, i0 : i0 + fx] - h[j0 - 1, i0 : i0 + fx] > tol)
            )
        e = j0 + fy - 1
        return None if e == ny - 1 else np.mean(h[e, i0 : i0 + fx] - h[e + 1, i0 : i0 + fx] > tol)

    sides = [s for s in (seam(k) for k in 'lrdu') if s is not None]

    def differs(j, i, nbs):
        return any(abs(h[j, i] - h[b, a]) > tol for b, a in nbs if 0 <= b < ny and 0 <= a < nx)

    j1, i1 = j0 + fy - 1, i0 + fx - 1
    corners = [
        differs(j0, i0, [(j0, i0 - 1), (j0 - 1, i0)]),
        differs(j0, i1, [(j0, i1 + 1), (j0 - 1, i1)]),
        differs(j1, i0, [(j1, i0 - 1), (j1 + 1, i0)]),
        differs(j1, i1, [(j1, i1 + 1), (j1 + 1, i1)]),
    ]
    nc, npx = 4, 2

    def band(j_lo, j_hi, i_lo, i_hi):
        b = h[max(j_lo, 0) : max(j_hi, 0), max(i_lo, 0) : max(i_hi, 0)]
        return b.size > 0 and b.max() > zb + tol

    near = nc + npx - 1
    useful = min(fx, fy) * cell

    def gap(profile, start, step):
        k = start
        while 0 <= k < len(profile):
            if profile[k] > zb + tol:
                return abs(k - start) * cell - p.clearance
            k += step
        return abs(k - start) * cell

    cols = h[j0 : j0 + fy, :].max(axis=0)
    rows = h[:, i0 : i0 + fx].max(axis=1)
    gaps = [
        gap(cols, i0 - 1, -1),
        gap(cols, i1 + 1, 1),
        gap(rows, j0 - 1, -1),
        gap(rows, j1 + 1, 1),
    ]
    waste = [max(g, 0.0) if g < useful - 1e-9 else 0.0 for g in gaps]
    lateral = [
        band(j0, j0 + fy, i0 - nc - npx, i0 - nc) or i0 <= near,
        band(j0, j0 + fy, i1 + 1 + nc, i1 + 1 + nc + npx) or nx - 1 - i1 <= near,
        band(j0 - nc - npx, j0 - nc, i0, i0 + fx) or j0 <= near,
        band(j1 + 1 + nc, j1 + 1 + nc + npx, i0, i0 + fx) or ny - 1 - j1 <= near,
    ]
    cols = np.flatnonzero(sup.any(axis=0))
    rows = np.flatnonzero(sup.any(axis=1))
    px, py = fx * cell / 2, fy * cell / 2  # a centred CoG
    edge = min(
        px - cols.min() * cell,
        (cols.max() + 1) * cell - px,
        py - rows.min() * cell,
        (rows.max() + 1) * cell - py,
    )
    out = max(cols.min(), fx - 1 - cols.max(), rows.min(), fy - 1 - rows.max()) * cell
    return {
        'com_margin': min(1.0, edge / (0.5 * math.hypot(fx * cell, fy * cell))),
        'overhang': 1.0 - out / (max(fx, fy) * cell),
        'lowness': 1.0 - (0.144 + zb) / (0.144 + p.lowness_scale),
        'edge_flush': np.mean(corners),
        'gap_waste': 1.0 - np.mean(waste) / useful,
        'lateral_proximity': np.mean(lateral),
        'zb': zb,
        'support_ratio': sup.mean(),
        'void_fill': 1.0 if zb <= tol else 1.0 - void / max(zb, cell),
        'levelness': 1.0 / (1.0 + new.std() / p.levelness_scale),
        'peak_penalty': 1.0 - max(0.0, zb + H - h.max()) / H,
        'seam_break': 1.0 - np.mean(sides) if sides else 1.0,
    }


def test_vectorised_terms_match_a_cell_by_cell_reading():
    rng = np.random.default_rng(21)
    cells = np.zeros((80, 120))
    for _ in range(10):
        j, i = rng.integers(0, 70), rng.integers(0, 100)
        cells[j : j + rng.integers(10, 30), i : i + rng.integers(10, 40)] = rng.choice(
            [0.1, 0.2, 0.3]
        )
    spec = PackageSpec('v', 'x', (0.30, 0.22, 0.12), 1.8)
    params = HeuristicParams(min_support_ratio=0.0, max_stack_height=10.0)
    c = score_candidates(spec, _map(cells), params)
    picks = rng.choice(len(c.score), size=40, replace=False)
    for k in picks:
        fx, fy = (30, 22) if c.yaw[k] == 0.0 else (22, 30)
        ref = _brute(cells, int(c.i0[k]), int(c.j0[k]), fx, fy, 0.12, params)
        np.testing.assert_allclose(c.z_base[k], ref['zb'])
        for name in (
            'support_ratio',
            'void_fill',
            'levelness',
            'peak_penalty',
            'seam_break',
            'lowness',
            'edge_flush',
            'lateral_proximity',
            'gap_waste',
            'com_margin',
            'overhang',
        ):
            np.testing.assert_allclose(c.terms[k, TERMS.index(name)], ref[name], err_msg=name)


def test_footprint_windows_contain_the_whole_box_even_off_the_grid():
    # 0.402 x 0.352 m rounds to 40 x 35 cells; the window must hold all of it (41 x 36 cells),
    # or a box at the rim sticks past the deck and into its neighbours' clearance.
    spec = PackageSpec('r', 'random', (0.402, 0.352, 0.162), 3.0)
    c = score_candidates(spec, HeightMap.flat(), _params())
    half_x = np.where(np.isclose(c.yaw, 0.0), 0.402, 0.352) / 2
    half_y = np.where(np.isclose(c.yaw, 0.0), 0.352, 0.402) / 2
    assert np.all(c.x - half_x >= -1e-9) and np.all(c.x + half_x <= 1.2 + 1e-9)
    assert np.all(c.y - half_y >= -0.4 - 1e-9) and np.all(c.y + half_y <= 0.4 + 1e-9)
    assert (c.x - half_x).min() <= 0.005 + 1e-9  # centred in its window, within a cell of the rim


def test_reach_as_a_pure_filter_is_asked_lazily_in_rank_order():
    reach = _DiscReach(z_max=0.144 + 0.40)
    planner = ScorePlanner(_params(), reach=reach)  # reachability weight 0
    res = planner.choose(STD_M, HeightMap.flat(), None)
    x, y = res.plan.position[:2]
    assert 0.45 <= math.hypot(x - 0.6, y + 0.72) <= 1.0
    cands = planner.candidates(STD_M, HeightMap.flat(), None)
    asked = np.count_nonzero(cands.reach_state)
    assert 0 < asked < len(cands.score) // 4  # far fewer than every candidate
    # Everything ranked above the plan was asked and found unreachable.
    k = int(np.flatnonzero(cands.reach_state == 1)[0])
    assert np.all(cands.reach_state[:k] == -1)
    assert res.reject_summary.get('out_of_reach', 0) == np.count_nonzero(cands.reach_state < 0)
    # Nothing reachable: every candidate is asked, and the summary says why.
    none = ScorePlanner(_params(), reach=_DiscReach(z_max=0.0))
    res = none.choose(STD_M, HeightMap.flat(), None)
    n_valid = len(none.candidates(STD_M, HeightMap.flat(), None).score)
    assert res.plan is None and res.reject_summary['out_of_reach'] == n_valid


def test_the_plan_is_reachable_by_the_analytic_ur10e_oracle():
    from palletizer.core.motion.reach import AnalyticReach

    reach = AnalyticReach()
    spec = PackageSpec('b', 'book_s', (0.24, 0.18, 0.10), 1.2)
    plan = ScorePlanner(_params(), reach=reach).choose(spec, HeightMap.flat(), None).plan
    z_tcp = plan.position[2] + 0.05 + 0.0015 + 0.002
    one = np.array([1.0])
    assert reach.reachable(
        one * plan.position[0], one * plan.position[1], one * z_tcp, one * plan.yaw
    )[0]


def test_gap_waste_grades_the_leftover():
    spec = PackageSpec('g', 'x', (0.30, 0.20, 0.10), 1.0)  # useful width = shorter side 0.20
    c = score_candidates(spec, HeightMap.flat(), _params())
    g = c.terms[:, TERMS.index('gap_waste')]

    def at(i0: int, j0: int) -> float:
        k = np.flatnonzero((c.i0 == i0) & (c.j0 == j0) & (c.yaw == 0.0))
        return float(g[k[0]])

    assert at(0, 0) == 1.0  # flush in the corner
    np.testing.assert_allclose(at(5, 30), 1 - 0.05 / 4 / 0.20)  # a 5 cm sliver to the rim
    np.testing.assert_allclose(at(10, 30), 1 - 0.10 / 4 / 0.20)  # a wider sliver is worse
    assert at(45, 30) == 1.0  # room all round is not waste


def test_a_finer_map_is_max_pooled_keeping_spikes_and_blind_blocks():
    from palletizer.core.planning.heuristic_windows import pool

    cells = np.zeros((160, 240))
    cells[101, 33] = 0.3  # one 5 mm spike
    observed = np.ones_like(cells, dtype=bool)
    observed[10:12, 20:22] = False  # a whole pooled cell unseen
    observed[40, 60] = False  # a quarter of one unseen
    cells[41, 61] = 0.05
    h, obs, cell = pool(HeightMap(cells, observed, (0.0, -0.4), 0.005), 0.010)
    assert h.shape == (80, 120) and cell == 0.010
    assert h[50, 16] == 0.3 and h.max() == 0.3
    assert not obs[5, 10] and obs.sum() == 80 * 120 - 1
    assert obs[20, 30] and h[20, 30] == 0.05


def test_noisy_maps_group_bases_conservatively(monkeypatch):
    import palletizer.core.planning.heuristic_windows as windows

    rng = np.random.default_rng(8)
    cells = np.zeros((80, 120))
    cells[:40, :60] = 0.18
    cells += rng.normal(0.0, 0.0005, cells.shape)
    spec = PackageSpec('n', 'x', (0.30, 0.22, 0.12), 1.8)
    params = _params(support_tol=0.004, min_support_ratio=0.0)
    monkeypatch.setattr(windows, 'MAX_LEVELS', 10**9)
    exact = score_candidates(spec, _map(cells), params)
    monkeypatch.setattr(windows, 'MAX_LEVELS', 8)
    grouped = score_candidates(spec, _map(cells), params)

    def support(c):
        return {(y, i, j): s for y, i, j, s in zip(c.yaw, c.i0, c.j0, c.support, strict=True)}

    e, g = support(exact), support(grouped)
    assert set(g) <= set(e) and len(g) > 0.9 * len(e)
    diff = np.array([e[k] - g[k] for k in g])
    assert np.all(diff >= -1e-12)  # grouping never adds support
    assert np.mean(diff == 0.0) > 0.9  # and rarely removes any


def test_stack_check_refuses_a_slot_that_leaves_the_believed_stack_toppling():
    from types import SimpleNamespace

    from palletizer.core.measure import measure_placement, world_to_pallet

    planner = ScorePlanner(_params(support_tol=0.006))  # configs/planner.yaml's
    a = planner.choose(STD_M, HeightMap.flat(), None).plan
    assert a is not None
    pose = world_to_pallet((*a.position, a.yaw))
    planner.record(measure_placement(0, STD_M, 1, pose, pose, []))
    top = PackageSpec('std_m-01', 'std_m', (0.42, 0.30, 0.18), 4.2)
    planner.book.remember(top)
    zc = a.position[2] + 0.18

    def stable(dx: float) -> bool:
        cands = SimpleNamespace(
            x=np.array([a.position[0] + dx]), y=np.array([a.position[1]]), yaw=np.array([0.0])
        )
        return planner._stable(top, cands, 0, 2, zc)

    # Centred on the lid it stands; its centre of mass 90 mm past the lid's edge, it tips.
    assert stable(0.0) and stable(0.15)
    assert not stable(0.30)
    # A base 5 mm off what it rests on (the map's error) still rests on it; 20 mm floats.
    on_lid = SimpleNamespace(
        x=np.array([a.position[0]]), y=np.array([a.position[1]]), yaw=np.array([0.0])
    )
    assert planner._stable(top, on_lid, 0, 2, zc + 0.005)
    assert not planner._stable(top, on_lid, 0, 2, zc + 0.020)


def test_reserve_takes_the_best_slot_that_leaves_room_for_the_largest_carton():
    from palletizer.core.planning.heuristic import _stamped

    # Free deck only in a 0.95 x 0.52 m corner; everything else stands 1.30 m high (no slot).
    hm, small = corner_map(95), SMALL

    # A load as heavy as the carton, its CoG as far the other way from the deck's centre as
    # the free corner's middle (-0.125, -0.14 m): pallet_com pulls the carton there.
    load = PalletState(0, small.mass_kg, (0.125, 0.14, 0.65), 0.1, 0.5, 0.0, 0.0)

    def room_after(tries: int) -> tuple[bool, bool]:
        # configs/planner.yaml's weights.
        planner = ScorePlanner(HeuristicParams(support_tol=0.006, reserve_tries=tries))
        plan = planner.choose(small, hm, load).plan
        assert plan is not None
        after = _stamped(hm, plan, small, planner.pallet.deck_z)
        return planner._room_for_reserve(hm, None), planner._room_for_reserve(after, None)

    # The score alone puts it mid-corner, where heavy_l's 0.55 x 0.36 m no longer fits; with
    # the reserve on, the best slot that keeps room for it.
    assert room_after(0) == (True, False)
    assert room_after(1000) == (True, True)


def test_a_carton_of_the_reserves_size_takes_the_room_kept_for_it():
    # A 0.60 x 0.52 m corner of free deck (room for one reserve box), everything else a flat
    # plateau 1.10 m high: an 0.18 m carton may stack there, the 0.26 m reserve box may not.
    cells = np.full((80, 120), 1.10)
    cells[:52, :60] = 0.0
    hm = HeightMap(cells, None, (0.0, -0.4), 0.01)
    big = PackageSpec('big', 'random', (0.52, 0.334, 0.18), 7.5)  # level 33 seed 37's
    planner = ScorePlanner(HeuristicParams(support_tol=0.006, reserve_tries=20000))
    assert planner._reserve_sized(big) and not planner._reserve_sized(SMALL)
    # It is the carton the room is kept for: it takes the floor, not the plateau.
    plan = planner.choose(big, hm, None).plan
    assert plan is not None and plan.position[2] < planner.pallet.deck_z + 0.1
    # A smaller one keeps the room and stacks (its lowness loses to the room).
    small = PackageSpec('mid', 'random', (0.45, 0.30, 0.18), 4.0)
    assert not planner._reserve_sized(small)
    plan = planner.choose(small, hm, None).plan
    assert plan is not None and plan.position[2] > planner.pallet.deck_z + 1.10


def test_the_reserve_rooms_left_by_a_slot_agree_with_the_map_stamped_with_it():
    from palletizer.core.planning.heuristic import _stamped

    hm, small = corner_map(95), SMALL
    planner = ScorePlanner(HeuristicParams(support_tol=0.006))
    rooms = planner._reserve_rooms(hm, None)
    cands = planner.candidates(small, hm, None)
    seen = set()
    for k in range(0, len(cands.score), 7):
        x, y, yaw = float(cands.x[k]), float(cands.y[k]), float(cands.yaw[k])
        zc = planner.pallet.deck_z + float(cands.z_base[k]) + 0.06
        plan = PlacementPlan((x, y, zc), yaw, 1, 's', 0.0, 1.0)
        fast = rooms.left_by(x, y, yaw, small.dims_m)
        exact = planner._room_for_reserve(_stamped(hm, plan, small, planner.pallet.deck_z), None)
        # Conservative: a slot said to leave room does; it may miss room the map keeps only
        # by the one-cell margin.
        assert exact or not fast, (x, y, yaw)
        seen.add((fast, exact))
    assert (True, True) in seen and (False, False) in seen


def test_reserve_settings_are_checked():
    from palletizer.core.errors import PalletizerError

    with pytest.raises(PalletizerError, match='reserve'):
        HeuristicParams(reserve=(0.5, 0.3))
    with pytest.raises(PalletizerError, match='reserve_tries'):
        HeuristicParams(reserve_tries=-1)


def test_despeckle_lowers_lone_spikes_and_keeps_cartons():
    from palletizer.core.planning.heuristic_windows import despeckle

    h = np.zeros((80, 120))
    h[30:50, 40:79] = 0.24  # a carton's lid, 39 x 20 cells
    h[60, 100] = 0.006  # a deck reading 6 mm high
    h[10, 5] = 0.30  # a lone cell far above the cap
    out = despeckle(h, 0.006)
    assert out[60, 100] == 0.0  # the spike is gone
    assert out[10, 5] == pytest.approx(0.294)  # lowered by the cap only
    np.testing.assert_array_equal(out[30:50, 40:79], 0.24)  # the lid, corners included
    assert np.all(out <= h)  # it never raises a cell
    assert despeckle(h, 0.0) is h


def test_a_deck_spike_no_longer_hides_a_floor_slot_for_a_large_carton():
    # Level 33 seed 24 (cameras): one cell of a deck reading mostly 0 (0-3 mm elsewhere) read
    # 6 mm; every window of a 0.55 x 0.36 m box over it took that as its base and lost the
    # cells at 0.
    rng = np.random.default_rng(3)
    cells = np.where(rng.random((80, 120)) < 0.5, 0.0, rng.uniform(0.0, 0.003, (80, 120)))
    cells[0:80:9, 0:120:11] = 0.0065  # a sparse lattice of spikes: one in every window
    spec = PackageSpec('big', 'random', (0.55, 0.36, 0.26), 6.0)
    params = _params(support_tol=0.006, min_support_ratio=0.6)
    plain = score_candidates(spec, _map(cells), params)
    assert len(plain.score) == 0 and plain.reject_summary['min_support_ratio'] > 0
    cleaned = score_candidates(spec, _map(cells), dataclasses.replace(params, despeckle=0.006))
    assert len(cleaned.score) > 0 and np.all(cleaned.support == 1.0)


def test_despeckle_is_checked():
    from palletizer.core.errors import PalletizerError

    with pytest.raises(PalletizerError, match='despeckle'):
        HeuristicParams(despeckle=-0.001)


def _ridges() -> HeightMap:
    """0.2 m ridges 0.1 m wide, 0.15 m apart across the pallet: a std_m lid finds at most
    half its footprint supported, and the deck between them is too narrow for it."""
    cells = np.zeros((80, 120))
    for i in range(0, 120, 25):
        cells[:, i : i + 10] = 0.2
    return _map(cells)


def test_the_last_resort_relaxes_support_only_when_asked():
    planner = ScorePlanner(_params(min_support_ratio=0.6, last_resort_support=(0.55, 0.45)))
    usual = planner.choose(STD_M, _ridges(), None)
    assert usual.plan is None and usual.reject_summary['min_support_ratio'] > 0
    forced = planner.choose(STD_M, _ridges(), None, (), last_resort=True)
    assert forced.plan is not None
    assert 0.45 <= forced.plan.predicted_support < 0.55  # the second ratio found it
    assert forced.reject_summary == usual.reject_summary  # why the usual rules found none
    # Without relaxed ratios a last resort is the usual answer; with a slot, it is unchanged.
    bare = ScorePlanner(_params(min_support_ratio=0.6))
    assert bare.choose(STD_M, _ridges(), None, (), last_resort=True).plan is None
    empty = _map(np.zeros((80, 120)))
    assert planner.choose(STD_M, empty, None, (), last_resort=True).plan == (
        planner.choose(STD_M, empty, None).plan
    )


def test_last_resort_support_is_checked():
    from palletizer.core.errors import PalletizerError

    for bad in ((0.6,), (0.4, 0.5), (0.5, 0.5), (-0.1,), 0.4):
        with pytest.raises(PalletizerError, match='last_resort_support'):
            HeuristicParams(min_support_ratio=0.6, last_resort_support=bad)
    assert HeuristicParams(last_resort_support=[0.5, 0.4]).last_resort_support == (0.5, 0.4)


class _RecordingReach(_DiscReach):
    """_DiscReach that keeps every (x, y) it was asked about."""

    def __init__(self, z_max: float) -> None:
        super().__init__(z_max)
        self.asked: list[tuple[float, float]] = []

    def reachable(self, x, y, z_tcp, yaw):
        self.asked += list(zip(np.asarray(x).tolist(), np.asarray(y).tolist(), strict=True))
        return super().reachable(x, y, z_tcp, yaw)


def test_reach_is_asked_where_the_tcp_stands_over_a_lid_gripped_off_centre():
    """A book_s (240 x 180 mm) is gripped by an off-centre cup block: the TCP stands 44 mm off
    the lid centre, on either side as the carton may be held either way round. Level 17 seed
    5 planned slots whose centre the reach table passed and whose TCP the arm could not take;
    the plan's TCP positions, both ways, are now inside the reachable disc."""
    from palletizer.core.motion.grasp import GripperGeometry, plan_grasp

    gripper = GripperGeometry()
    ox, oy = plan_grasp(0.24, 0.18, None, gripper).offset
    assert math.hypot(ox, oy) > 0.03
    reach = _RecordingReach(z_max=0.144 + 0.40)
    spec = PackageSpec('b', 'book_s', (0.24, 0.18, 0.10), 1.2)
    plan = (
        ScorePlanner(_params(), reach=reach, tool=gripper)
        .choose(spec, HeightMap.flat(), None)
        .plan
    )
    assert_tcp_asked_and_in_disc(plan, (ox, oy), reach.asked)
    # A centred cup block (a carton as large as the cup field) is asked at its centre.
    reach = _RecordingReach(z_max=0.144 + 0.40)
    plan = (
        ScorePlanner(_params(), reach=reach, tool=gripper)
        .choose(STD_M, HeightMap.flat(), None)
        .plan
    )
    assert any(math.dist(p, plan.position[:2]) < 1e-9 for p in reach.asked)
