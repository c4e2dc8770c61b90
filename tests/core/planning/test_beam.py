"""Beam search: valid whole stacks, the height map as a veto, exclusions and lookahead."""

from __future__ import annotations

import numpy as np
from palletizer.core.contracts import HeightMap, PackageSpec
from palletizer.core.planning import BEAM_TERMS, BeamParams, BeamPlanner, PlannerKind
from palletizer.core.planning import beam as beam_module
from palletizer.core.stability import validate_stack

from ._stacking import SMALL, assert_tcp_asked_and_in_disc, corner_map, place_exactly


def _random_specs(seed: int, n: int) -> list[PackageSpec]:
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(n):
        L, W = sorted(rng.uniform(0.22, 0.45, 2), reverse=True)
        H = rng.uniform(0.10, 0.22)
        cog = (rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), 0.0)
        specs.append(PackageSpec(f'r-{i:02d}', 'random', (L, W, H), rng.uniform(1, 6), cog))
    return specs


def test_beam_plans_a_valid_first_box_with_its_six_components():
    planner = BeamPlanner()
    assert planner.kind is PlannerKind.beam and planner.oracle is False
    spec = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2)
    res = planner.choose(spec, HeightMap.flat(), None)
    plan = res.plan
    assert plan is not None and plan.layer == 1 and plan.slot.startswith('beam-L1-')
    assert set(plan.breakdown) == set(BEAM_TERMS)
    assert all(0.0 <= v <= 1.0 for v in plan.breakdown.values())
    np.testing.assert_allclose(plan.position[2], 0.144 + 0.09)
    assert 0.0 <= plan.position[0] - 0.21 and plan.position[0] + 0.21 <= 1.2


def test_every_beam_stack_passes_the_quasi_static_check():
    specs = _random_specs(4, 7)
    planner = BeamPlanner(BeamParams(lookahead=1))
    placed = []
    cells = np.zeros((80, 120))
    for k, spec in enumerate(specs):
        plan = planner.choose(spec, HeightMap(cells), None).plan
        assert plan is not None
        p = place_exactly(k, spec, plan, placed)
        placed.append(p)
        planner.record(p)
        check = validate_stack(planner.stack(), min_support=0.62, min_margin=0.008)
        assert check.ok, check.reason
    assert len(planner.stack()) == 7


def test_beam_vetoes_cells_the_height_map_sees_but_no_record_explains():
    spec = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2)
    cells = np.zeros((80, 120))
    cells[30:50, 40:80] = 0.25  # an unrecorded obstacle around the pallet centre
    res = BeamPlanner().choose(spec, HeightMap(cells), None)
    assert res.plan is not None and res.reject_summary['map_conflict'] > 0
    x, y = res.plan.position[:2]
    half = (0.21, 0.15) if res.plan.yaw == 0.0 else (0.15, 0.21)
    inside = (x + half[0] > 0.40 and x - half[0] < 0.80) and (
        y + half[1] > -0.10 and y - half[1] < 0.10
    )
    assert not inside


def test_beam_excluded_slot_gives_another_slot():
    spec = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2)
    planner = BeamPlanner()
    first = planner.choose(spec, HeightMap.flat(), None).plan
    second = planner.choose(spec, HeightMap.flat(), None, excluded_slots={first.slot}).plan
    assert second is not None and second.slot != first.slot


def test_beam_looks_ahead_only_when_a_forecast_is_set(monkeypatch):
    calls = []
    real = beam_module.expand

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(beam_module, 'expand', counting)
    specs = _random_specs(9, 3)
    planner = BeamPlanner(BeamParams(beam_width=4, candidates_per_node=6))
    planner.choose(specs[0], HeightMap.flat(), None)
    assert len(calls) == 1
    calls.clear()
    planner.set_forecast(specs[1:])
    plan = planner.choose(specs[0], HeightMap.flat(), None).plan
    assert plan is not None
    assert len(calls) == 1 + 4 + 4  # root, then each beam node at depth 2 and 3


def test_beam_no_fit_is_a_result():
    huge = PackageSpec('h', 'huge', (1.3, 0.9, 0.2), 5.0)
    res = BeamPlanner().choose(huge, HeightMap.flat(), None)
    assert res.plan is None


class _NotThere:
    """Reaches every tool-down pose but those within 5 cm of (x, y) (a stand-in for the reach
    table, which says where the wrist would strike the robot's base)."""

    def __init__(self, x: float, y: float):
        self.x, self.y, self.asked = x, y, 0

    def reachable(self, x, y, z, yaw):
        self.asked += len(x)
        return np.hypot(np.asarray(x) - self.x, np.asarray(y) - self.y) > 0.05


def test_beam_with_a_reach_oracle_rejects_release_poses_the_arm_cannot_take():
    spec = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2)
    free = BeamPlanner().choose(spec, HeightMap.flat(), None).plan
    assert free is not None
    reach = _NotThere(free.position[0], free.position[1])
    res = BeamPlanner(reach=reach).choose(spec, HeightMap.flat(), None)
    assert res.plan is not None and reach.asked > 0
    assert (
        np.hypot(res.plan.position[0] - free.position[0], res.plan.position[1] - free.position[1])
        > 0.05
    )
    assert res.reject_summary['out_of_reach'] >= 1


def test_beam_reserve_starts_the_search_from_moves_that_leave_room_for_the_largest_carton():
    # Free deck only in a 0.90 x 0.52 m corner (map_conflict elsewhere).
    hm, small = corner_map(90), SMALL

    def room_before_after(tries: int) -> tuple[bool, bool]:
        planner = BeamPlanner(BeamParams(reserve=(0.55, 0.40, 0.26), reserve_tries=tries))
        plan = planner.choose(small, hm, None).plan
        assert plan is not None
        p = place_exactly(0, small, plan, [])
        before = planner._room(planner.stack(), hm)
        planner.record(p)
        return before, planner._room(planner.stack(), hm)

    # The score alone puts it lengthwise in the corner, where 0.55 x 0.40 m no longer fits; with
    # the reserve on, a first move that keeps room for it.
    assert room_before_after(0) == (True, False)
    assert room_before_after(200) == (True, True)


def test_beam_reserve_settings_are_checked():
    import pytest
    from palletizer.core.errors import PalletizerError

    with pytest.raises(PalletizerError, match='reserve'):
        BeamParams(reserve=(0.5, 0.3))
    with pytest.raises(PalletizerError, match='reserve_tries'):
        BeamParams(reserve_tries=-1)


class _AskedDisc:
    """Reachable inside an annulus around the robot base (a stand-in for the reach table);
    keeps every (x, y) it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, float]] = []

    def reachable(self, x, y, z, yaw):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        self.asked += list(zip(x.tolist(), y.tolist(), strict=True))
        d = np.hypot(x - 0.60, y + 0.72)
        return (d >= 0.45) & (d <= 1.0)


def test_beam_asks_reach_where_the_tcp_stands_over_a_lid_gripped_off_centre():
    """As the heuristic: a book_s (240 x 180 mm) is held by an off-centre cup block, so the TCP
    stands 44 mm off the lid centre, on either side as the carton may be held either way round.
    Both TCP positions of the beam's plan were asked and lie inside the reachable disc; a
    carton as large as the cup field is asked at its centre."""
    import math

    from palletizer.core.motion.grasp import GripperGeometry, plan_grasp

    gripper = GripperGeometry()
    ox, oy = plan_grasp(0.24, 0.18, None, gripper).offset
    assert math.hypot(ox, oy) > 0.03
    reach = _AskedDisc()
    spec = PackageSpec('b', 'book_s', (0.24, 0.18, 0.10), 1.2)
    plan = BeamPlanner(reach=reach, tool=gripper).choose(spec, HeightMap.flat(), None).plan
    assert plan is not None
    assert_tcp_asked_and_in_disc(plan, (ox, oy), reach.asked)
    reach = _AskedDisc()
    big = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2)
    plan = BeamPlanner(reach=reach, tool=gripper).choose(big, HeightMap.flat(), None).plan
    assert plan is not None
    assert any(math.dist(p, plan.position[:2]) < 1e-9 for p in reach.asked)


def test_beam_last_resort_relaxes_support_only_when_asked():
    from palletizer.core.contracts import PlacementPlan

    # A 0.24 x 0.18 m book stands alone in a 0.90 x 0.70 m patch of deck (the rest stands 1.30
    # m high): a std_m fits beside it nowhere, and on its lid it rests on 34 % of its base.
    small = PackageSpec('book_s-00', 'book_s', (0.24, 0.18, 0.10), 1.2)
    std_m = PackageSpec('std_m-01', 'std_m', (0.42, 0.30, 0.18), 4.2)
    cells = np.full((80, 120), 1.30)
    cells[5:75, 15:105] = 0.0
    cells[31:49, 48:72] = 0.10
    hm = HeightMap(cells, None, (0.0, -0.4), 0.01)
    planner = BeamPlanner(BeamParams(lookahead=1, last_resort_support=(0.5, 0.3)))
    planner.book.remember(small)
    at = PlacementPlan((0.6, 0.0, 0.194), 0.0, 1, 'book', 0.0, 1.0, {})
    planner.record(place_exactly(0, small, at, []))
    usual = planner.choose(std_m, hm, None)
    assert usual.plan is None and usual.reject_summary['min_support'] > 0
    forced = planner.choose(std_m, hm, None, (), last_resort=True)
    assert forced.plan is not None and 0.3 <= forced.plan.predicted_support < 0.5
    assert forced.reject_summary == usual.reject_summary
    assert planner.params.min_support_ratio == 0.62  # the usual rule is back
    assert planner.choose(std_m, hm, None).plan is None
    bare = BeamPlanner(BeamParams(lookahead=1))
    bare.book.remember(small)
    bare.record(place_exactly(0, small, at, []))
    assert bare.choose(std_m, hm, None, (), last_resort=True).plan is None


def _centre_mm(slot: str) -> tuple[int, int]:
    m = beam_module._SLOT.fullmatch(slot)
    assert m is not None, slot
    return int(m[2]), int(m[3])


def test_a_refused_slot_excludes_its_neighbours_within_the_radius():
    """Level 23 seed 18: the executor refused 475 x 288, then 475 x 304, then 475 x 288 turned
    (the cross over the stack out of reach each time). With exclude_radius a refused slot
    takes its layer's first moves within that distance with it, at any turn."""
    spec = PackageSpec('std_m-01', 'std_m', (0.42, 0.30, 0.18), 4.2)
    hm = HeightMap(np.zeros((80, 120)), None, (0.0, -0.4), 0.01)
    plain = BeamPlanner(BeamParams(lookahead=1))
    # On a bare deck the first moves stand in the corners, lengthwise then turned, the turned
    # ones 60 mm off along x and y.
    excluded: list[str] = []
    for _ in range(4):
        got = plain.choose(spec, hm, None, tuple(excluded)).plan
        assert got is not None and got.slot.endswith('r0')
        excluded.append(got.slot)
    beside = plain.choose(spec, hm, None, tuple(excluded)).plan
    assert beside is not None
    bx, by = _centre_mm(beside.slot)
    assert min(max(abs(bx - x), abs(by - y)) for x, y in (_centre_mm(e) for e in excluded)) == 60
    wide = BeamPlanner(BeamParams(lookahead=1, exclude_radius=0.06))
    assert wide.choose(spec, hm, None).plan.slot == excluded[0]
    none = wide.choose(spec, hm, None, tuple(excluded))
    assert none.plan is None and none.reject_summary['excluded'] == 8
    narrow = BeamPlanner(BeamParams(lookahead=1, exclude_radius=0.05))
    assert narrow.choose(spec, hm, None, tuple(excluded)).plan.slot == beside.slot
    # A slot of another layer, or another planner's name, excludes nothing more.
    fx, fy = _centre_mm(excluded[0])
    other = f'beam-L7-{fx}x{fy}r0'
    assert wide.choose(spec, hm, None, (other, 'score-L1-3x4')).plan.slot == excluded[0]


def test_beam_exclude_radius_is_checked():
    import pytest
    from palletizer.core.errors import PalletizerError

    with pytest.raises(PalletizerError, match='exclude_radius'):
        BeamParams(exclude_radius=-0.01)


def test_beam_surface_term_is_each_moves_own_surface_std():
    # expand takes the regularity of every valid move's surface at once: each must be the
    # double one std of the sample grid with that box alone gives.
    from palletizer.core.planning.beam import _surface_grid, expand
    from palletizer.core.stability import StackBox

    params = BeamParams()
    planner = BeamPlanner(params)
    specs = _random_specs(8, 6)
    cells, placed = np.zeros((80, 120)), []
    for k, spec in enumerate(specs[:5]):
        plan = planner.choose(spec, HeightMap(cells), None).plan
        assert plan is not None
        placed.append(place_exactly(k, spec, plan, placed))
        planner.record(placed[-1])
    stack = planner.stack()
    moves = expand(stack, specs[5], params, planner.pallet)
    assert len(moves) > 10
    gx, gy, top = _surface_grid(stack, params.surface_samples, planner.pallet.size_xy)
    for m in moves:
        r = m.box.rect
        inside = (gx >= r[0]) & (gx <= r[1]) & (gy >= r[2]) & (gy <= r[3])
        sd = np.where(inside, np.maximum(top, m.box.top), top).std()
        want = float(np.clip(1 - sd / params.max_height_m, 0, 1))
        assert m.components['regular_surface'] == want
        assert isinstance(m.box, StackBox)


def _candidates_per_box(stack, spec, params, pallet, heightmap, tool, yaw_deg):
    """The geometric rules as whole (candidate, box) arrays, one mask each (the form the
    per-axis one replaced): reject counts and the survivors' x0, y0, z, support."""
    from palletizer.core.planning.stack import map_max_under
    from palletizer.core.planning.tool import tool_half_extents

    L, W, H = spec.dims_m
    hx, hy = pallet.size_xy[0] / 2.0, pallet.size_xy[1] / 2.0
    c = params.clearance
    r = np.array([b.rect for b in stack]).reshape(-1, 4)
    bx0, bx1, by0, by1 = r.T
    bz0, btop = np.array([b.z for b in stack]), np.array([b.top for b in stack])
    quarter = round(yaw_deg / 90.0) % 2
    ex, ey = (W, L) if quarter else (L, W)
    xs = beam_module._axis_starts(ex, hx, bx0, bx1, c)
    ys = beam_module._axis_starts(ey, hy, by0, by1, c)
    gx, gy = np.meshgrid(xs, ys)
    x0, y0 = gx.ravel(), gy.ravel()
    x1, y1 = x0 + ex, y0 + ey
    ox = np.minimum(x1[:, None], bx1) - np.maximum(x0[:, None], bx0)
    oy = np.minimum(y1[:, None], by1) - np.maximum(y0[:, None], by0)
    area = np.clip(ox, 0, None) * np.clip(oy, 0, None)
    z = np.where(area > 1e-6, btop, 0.0).max(axis=1)
    ok = np.ones(len(x0), dtype=bool)
    counts = {}

    def rule(key, bad):
        nonlocal ok
        counts[key] = int(np.count_nonzero(ok & bad))
        ok &= ~bad

    rule('max_height', z + H > params.max_height_m + 1e-9)
    if heightmap is not None:
        rule('map_conflict', map_max_under(heightmap, x0, x1, y0, y1, pallet) > z + params.map_tol)
    vert = (bz0 < (z + H)[:, None] - params.level_tol) & (btop > z[:, None] + params.level_tol)
    gap_x = np.maximum(bx0 - x1[:, None], x0[:, None] - bx1)
    gap_y = np.maximum(by0 - y1[:, None], y0[:, None] - by1)
    rule('clearance', (vert & (gap_x < c - 1e-9) & (gap_y < c - 1e-9)).any(axis=1))
    if tool is not None:
        tx, ty = tool_half_extents(L, W, quarter, tool)
        cx, cy = x0 + ex / 2, y0 + ey / 2
        tx0, tx1, ty0, ty1 = cx - tx, cx + tx, cy - ty, cy + ty
        tox = np.minimum(tx1[:, None], bx1) - np.maximum(tx0[:, None], bx0)
        toy = np.minimum(ty1[:, None], by1) - np.maximum(ty0[:, None], by0)
        lid = z + H
        under = (tox > 1e-6) & (toy > 1e-6)
        struck = (under & (btop > lid[:, None] + params.level_tol)).any(axis=1)
        if heightmap is not None:
            mm = map_max_under(heightmap, tx0, tx1, ty0, ty1, pallet)
            struck |= mm > lid + params.map_tol
        rule('tool', struck)
    on_top = np.abs(btop - z[:, None]) <= params.level_tol
    support = np.where(z <= params.level_tol, 1.0, (area * on_top).sum(axis=1) / (ex * ey))
    rule('min_support', support < params.min_support_ratio - 1e-9)
    return counts, x0[ok], y0[ok], z[ok], support[ok]


def test_beam_candidate_rules_per_axis_match_the_rules_per_candidate_and_box():
    from palletizer.cli.bench_planner import stamp
    from palletizer.core.planning import build_planner
    from palletizer.core.stability import StackBox

    built = build_planner('beam')
    params, pallet, tool = built.params, built.pallet, built.tool
    specs = _random_specs(3, 12)
    planner = BeamPlanner(BeamParams(lookahead=1))
    cells, placed, checked = np.zeros((80, 120)), [], 0
    for k, spec in enumerate(specs):
        stack = planner.stack()
        hm = HeightMap(cells)
        r = np.array([b.rect for b in stack]).reshape(-1, 4)
        boxes = (*r.T, np.array([b.z for b in stack]), np.array([b.top for b in stack]))
        for heightmap, gripper in ((None, None), (hm, tool), (hm, None), (None, tool)):
            for yaw in (0.0, 90.0):
                got = beam_module._quarter_candidates(
                    stack, spec, params, pallet, heightmap, gripper, yaw, boxes
                )
                if not stack:
                    continue
                want = _candidates_per_box(stack, spec, params, pallet, heightmap, gripper, yaw)
                assert got is not None and got[2] == want[0]
                for a, b in zip(got[3:], want[1:], strict=True):
                    assert np.array_equal(a, b)
                checked += 1
        plan = planner.choose(spec, HeightMap(cells), None).plan
        if plan is None:
            break
        placed.append(place_exactly(k, spec, plan, placed))
        planner.record(placed[-1])
        stamp(cells, plan, spec)
    assert checked > 40 and isinstance(planner.stack()[0], StackBox)
