"""The set-aside buffer in the episode loop (ideal kinematic world of test_episode) and the
auxiliary table's set-down poses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.core.contracts import FailureCause, Observation, PackageSpec, PlanResult
from palletizer.core.episode import EpisodeSettings
from palletizer.core.planning import ScorePlanner
from palletizer.core.planning.buffer import Buffer, BufferSettings, BufferTable
from palletizer.core.ports import MotionOutcome

from tests.core.test_episode import STD_M, World, _run


def _table(slots: int = 2, reach=None) -> BufferTable:
    return BufferTable(
        (-0.37, -0.10), (0.25, 0.33), 0.58, BufferSettings(slots, 0.01, 0.08), reach
    )


class Picky:
    """The score heuristic, except that it finds no slot for `refuse[pid]` until that many
    cartons are on the pallet (-1: never), unless asked as a last resort for a carton in
    `rescue`. `last_resorts` lists the cartons asked for as a last resort."""

    def __init__(self, refuse: dict[str, int], rescue: tuple[str, ...] = ()) -> None:
        self.inner = ScorePlanner()
        self.refuse, self.rescue = refuse, rescue
        self.placed = 0
        self.last_resorts: list[str] = []
        self.kind, self.oracle = self.inner.kind, False

    def choose(self, spec, heightmap, pallet, excluded_slots=(), last_resort=False):
        if last_resort:
            self.last_resorts.append(spec.package_id)
        need = self.refuse.get(spec.package_id)
        if need is not None and (need < 0 or self.placed < need):
            if not (last_resort and spec.package_id in self.rescue):
                return PlanResult(None, {'support': 1})
        return self.inner.choose(spec, heightmap, pallet, excluded_slots)

    def record(self, placement):
        self.placed += 1
        self.inner.record(placement)

    def set_forecast(self, specs):
        self.inner.set_forecast(specs)


def _settings(slots: int) -> EpisodeSettings:
    return EpisodeSettings(buffer=_table(slots))


def _moves(w):
    return [(k, pid, p['buffer_slot']) for _, k, pid, p in w.events if 'buffer_slot' in p]


def test_a_carton_with_no_slot_waits_in_the_buffer_and_is_placed_once_the_stack_has_one():
    w = World()
    r = _run(w, Picky({'std_m-00': 2}), settings=_settings(1))
    assert r.success and r.n_placed == 4, w.events[-3:]
    # Set aside at once, taken back after the second placement, in the event vocabulary.
    assert _moves(w) == [('place', 'std_m-00', 0), ('pick', 'std_m-00', 0)]
    order = [p.package_id for p in w.placements]
    assert order == ['std_m-01', 'std_m-02', 'std_m-00', 'std_m-03']
    assert r.metrics['buffer_moves'] == 2 and r.metrics['buffer_motion_s'] >= 0.0
    # The set-down is measured like a place: it landed on its pose, wholly on the table.
    (aside,) = [p for _, k, _, p in w.events if k == 'place' and 'buffer_slot' in p]
    assert aside['error_xy_mm'] == 0.0 and aside['overhang_mm'] == 0.0
    # Measured in placement order: each placement's seq is later than the one before.
    seqs = [p.seq for p in w.placements]
    assert seqs == sorted(seqs)


class LidWorld(World):
    """The ideal world whose set-aside cartons stand `short` [m] lower than the gauge believed,
    and a perception that sees their lid (or not, with a why)."""

    def __init__(self, short: float, seen: bool = True) -> None:
        super().__init__()
        self.short, self.seen = short, seen
        self.picked: list = []
        self.lid_reason = ''

    def measure_lid(self, obs):
        if not self.seen:
            self.lid_reason = '3 lid points seen; expected 50'
            return None
        x, y, z = obs.position
        L, W, H = obs.dims_guess
        return Observation(
            obs.package_id, (x, y, z - self.short / 2), obs.yaw, (L, W, H - self.short), 1.0
        )

    def pick(self, observation):
        self.picked.append(observation)
        return super().pick(observation)


def test_a_take_back_aims_at_the_lid_as_seen_and_carries_its_height_on():
    w = LidWorld(short=0.012)
    r = _run(w, Picky({'std_m-00': 2}), settings=_settings(1))
    assert r.success and r.n_placed == 4
    back = w.picked[-2]  # the take-back, before the last carton of the source
    assert back.package_id == 'std_m-00'
    assert back.dims_guess[2] == pytest.approx(STD_M[2] - 0.012)
    # The top of the carton: 12 mm lower than believed, the cups go there.
    (take,) = [p for _, k, pid, p in w.events if k == 'pick' and 'buffer_slot' in p]
    assert take['lid_shift_mm'] == -12.0 and take['dims_mm'][2] == pytest.approx(
        STD_M[2] * 1000 - 12
    )
    # and the pallet placement plans with the measured height
    placed = {p.package_id: p for p in w.placements}['std_m-00']
    assert placed.dims_m[2] == pytest.approx(STD_M[2] - 0.012)


def test_an_unseen_lid_leaves_the_believed_pose_and_says_why():
    w = LidWorld(short=0.012, seen=False)
    r = _run(w, Picky({'std_m-00': 2}), settings=_settings(1))
    assert r.success
    (take,) = [p for _, k, pid, p in w.events if k == 'pick' and 'buffer_slot' in p]
    assert take['lid_unseen'] == '3 lid points seen; expected 50' and 'lid_shift_mm' not in take
    assert w.picked[-2].dims_guess[2] == STD_M[2]


def test_without_a_buffer_the_same_carton_ends_the_episode():
    w = World()
    r = _run(w, Picky({'std_m-00': 2}))
    assert r.failure is FailureCause.wrong_placement and r.n_placed == 0
    assert w.returned == ['std_m-00'] and _moves(w) == []


def test_a_carton_that_never_fits_ends_the_episode_once_the_load_is_done():
    w = World()
    picky = Picky({'std_m-01': -1})
    r = _run(w, picky, settings=_settings(2))
    assert r.failure is FailureCause.wrong_placement and r.n_placed == 3
    last = w.events[-1]
    assert last[1] == 'fail' and last[2] == 'std_m-01'
    assert 'no slot for the 1 set aside: std_m-01' in last[3]['reason']
    # Once the load was done the planner was asked for it as a last resort, and only then.
    assert picky.last_resorts == ['std_m-01']


def test_a_full_buffer_returns_the_carton_and_fails_honestly():
    w = World()
    picky = Picky({'std_m-00': -1, 'std_m-01': -1})
    r = _run(w, picky, settings=_settings(1))
    assert r.failure is FailureCause.wrong_placement
    assert _moves(w) == [('place', 'std_m-00', 0)] and w.returned == ['std_m-01']
    assert 'the buffer has no place' in w.events[-1][3]['reason']
    assert picky.last_resorts == ['std_m-01']  # the buffer had no place: the last resort


def _plans(w):
    return {pid: p for _, k, pid, p in w.events if k == 'plan'}


def test_the_last_resort_places_what_waits_in_the_buffer_once_the_load_is_done():
    w = World()
    picky = Picky({'std_m-01': -1}, rescue=('std_m-01',))
    r = _run(w, picky, settings=_settings(1))
    assert r.success and r.n_placed == 4, w.events[-3:]
    # Set aside, then taken back and placed only once the load was done, as a last resort.
    assert _moves(w) == [('place', 'std_m-01', 0), ('pick', 'std_m-01', 0)]
    assert [p.package_id for p in w.placements][-1] == 'std_m-01'
    plans = _plans(w)
    assert plans['std_m-01']['last_resort'] is True and 0.0 < plans['std_m-01']['support'] <= 1
    assert not any('last_resort' in plans[pid] for pid in plans if pid != 'std_m-01')
    assert picky.last_resorts == ['std_m-01', 'std_m-01']  # the drain's ask, then the plan


def test_the_last_resort_places_the_carton_in_hand_when_the_buffer_has_no_place():
    w = World()
    picky = Picky({'std_m-00': -1, 'std_m-01': -1}, rescue=('std_m-01',))
    r = _run(w, picky, settings=_settings(1))
    # std_m-00 waits in the only slot; std_m-01 would have ended the episode.
    assert r.failure is FailureCause.wrong_placement and r.n_placed == 3
    assert _moves(w) == [('place', 'std_m-00', 0)] and w.returned == []
    assert _plans(w)['std_m-01']['last_resort'] is True
    assert 'no slot for the 1 set aside: std_m-00' in w.events[-1][3]['reason']


def test_a_refused_set_down_leaves_the_carton_in_hand_and_returns_it():
    w = World(n=1)
    place = w.place

    def refuse_the_table(plan, spec, hm):
        if plan.slot.startswith('buffer'):
            return MotionOutcome(False, FailureCause.ik_unreachable, 'no IK', holding=True)
        return place(plan, spec, hm)

    w.place = refuse_the_table
    r = _run(w, Picky({'std_m-00': -1}), settings=_settings(1))
    assert r.failure is FailureCause.wrong_placement and w.returned == ['std_m-00']


def test_a_carton_set_down_that_is_not_on_the_table_ends_the_episode():
    # As when the auxiliary table was missing from the scene: the carton fell to the floor.
    w = World()
    place = w.place

    def fall(plan, spec, hm):
        out = place(plan, spec, hm)
        if plan.slot.startswith('buffer'):
            x, y, _, yaw = w.poses[spec.package_id]
            w.poses[spec.package_id] = (x, y, 0.05, yaw)
        return out

    w.place = fall
    r = _run(w, Picky({'std_m-00': 2}), settings=_settings(1))
    assert r.failure is FailureCause.wrong_placement
    aside, last = [p for _, k, _, p in w.events if 'buffer_slot' in p], w.events[-1]
    assert len(aside) == 1 and aside[0]['error_z_mm'] < -500
    assert last[1:3] == ('fail', 'std_m-00')
    assert 'not on the auxiliary table' in last[3]['reason']


def _spec(pid: str, dims) -> PackageSpec:
    return PackageSpec(pid, 'x', dims, 1.0)


def test_set_down_poses_stand_in_a_row_from_the_near_edge_and_never_overlap():
    table = _table(3)
    buf = Buffer(table)
    a = buf.slot_for(_spec('a', (0.30, 0.22, 0.12)))
    assert a is not None and a.index == 0
    # Long side across the table (yaw 0) takes 0.22 m of the row, from y = -0.43 + 0.01.
    assert a.yaw == 0.0 and a.y0 == pytest.approx(-0.42) and a.y1 == pytest.approx(-0.20)
    assert a.position[0] == pytest.approx(-0.12 - 0.01 - 0.15)
    assert a.position[2] == pytest.approx(0.58 + 0.06)
    buf.put(_spec('a', (0.30, 0.22, 0.12)), a)
    b = buf.slot_for(_spec('b', (0.48, 0.34, 0.22)))
    assert b is not None and b.index == 1 and b.y0 >= a.y1 + 0.08 - 1e-9
    buf.put(_spec('b', (0.48, 0.34, 0.22)), b)
    # The row is used up: a third carton of that size has no room, whatever k allows.
    assert buf.slot_for(_spec('c', (0.48, 0.34, 0.22))) is None
    # Taking one back frees its stretch of the row.
    buf.take('a')
    again = buf.slot_for(_spec('c', (0.30, 0.22, 0.12)))
    assert again is not None and again.y0 == pytest.approx(-0.42)


def test_a_carton_longer_than_the_table_is_wide_turns_and_k_caps_the_buffer():
    buf = Buffer(_table(1))
    s = buf.slot_for(_spec('a', (0.55, 0.36, 0.26)))  # heavy_l: 0.55 > 0.48 across
    assert s is not None and s.yaw == pytest.approx(math.pi / 2) and s.y1 - s.y0 == 0.55
    buf.put(_spec('a', (0.55, 0.36, 0.26)), s)
    assert buf.slot_for(_spec('b', (0.14, 0.11, 0.08))) is None  # k = 1


def test_the_configured_table_only_offers_poses_the_analytic_ik_reaches():
    from palletizer.core.motion.reach import AnalyticReach

    cfg = load_config()
    reach = AnalyticReach()
    table = BufferTable.from_config(cfg.cell, cfg.planner.buffer, reach)
    assert table.settings is cfg.planner.buffer
    table = BufferTable(table.centre, table.half_size, table.top, BufferSettings(1), reach)
    buf = Buffer(table)
    for dims in [(0.14, 0.11, 0.08), (0.42, 0.30, 0.18), (0.50, 0.36, 0.22), (0.55, 0.36, 0.26)]:
        s = buf.slot_for(_spec('x', dims))
        assert s is not None, dims
        lid = np.array([s.position[2] + dims[2] / 2])
        x, y = np.array([s.position[0]]), np.array([s.position[1]])
        assert reach.reachable(x, y, lid, np.array([s.yaw])).all()
    # A table out of reach offers nothing.
    far = BufferTable((-1.5, 1.0), (0.25, 0.33), 0.58, table.settings, reach)
    assert Buffer(far).slot_for(_spec('x', (0.42, 0.30, 0.18))) is None


def test_overhang_is_how_far_a_carton_reaches_past_the_table_top():
    table = _table(1)
    assert table.overhang((0.30, 0.20, 0.1), (-0.37, -0.10, 0.0)) == 0.0
    assert table.overhang((0.30, 0.20, 0.1), (-0.10, -0.10, 0.0)) == pytest.approx(0.17)
    assert table.overhang((0.30, 0.20, 0.1), (-0.37, 0.18, math.pi / 2)) == pytest.approx(0.10)


def test_a_last_resort_plan_shows_in_the_progress_lines():
    from palletizer.wiring.inprocess import MemorySink

    lines: list[str] = []
    sink = MemorySink(echo=lines.append)
    sink.event(3, 1.0, 'plan', 'bulky_l-19', {'last_resort': True, 'support': 0.456, 'retry': 1})
    sink.event(4, 2.0, 'plan', 'std_m-00', {'retry': 0})
    assert lines == ['bulky_l-19   last resort: a slot with 46 % of its base supported (retry 1)']
