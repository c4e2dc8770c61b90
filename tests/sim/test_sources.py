"""Sources: conveyor and table lines deliver at rest to the station, the truck offers its highest."""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass

import mujoco
import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.core.loads import draw_load, staging_jitter
from palletizer.sim.cartons import carton_default_xml
from palletizer.sim.sources import (
    ConveyorSource,
    Source,
    SourceError,
    TableSource,
    TruckParams,
    TruckPlan,
    TruckSource,
    conveyor_params,
    make_source,
    plan_truck_load,
    table_params,
    truck_params,
)
from palletizer.sim.sources.truck import _as_placed, _edge_clearance, _slots, _try_plan


class _World:
    """Floor + one source, stepped the way the Cell steps it (source.before_step, then mj_step)."""

    def __init__(self, source: Source, disturb=None) -> None:
        xml = (
            '<mujoco><compiler angle="radian" autolimits="true"/>'
            '<option timestep="0.002" integrator="implicitfast" cone="elliptic"/>'
            f'<default>{carton_default_xml()}</default><worldbody>'
            '<geom name="floor" type="plane" size="20 20 0.1" contype="3" conaffinity="3"/>'
            f'{source.scenery_xml()}{source.cartons_xml()}</worldbody></mujoco>'
        )
        self.source = source
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        source.bind(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)
        self._disturb = disturb

    @property
    def time(self) -> float:
        return float(self.data.time)

    def step(self, n: int) -> None:
        for _ in range(n):
            self.source.before_step(self.model, self.data)
            if self._disturb is not None:
                self._disturb(self.model, self.data)
            mujoco.mj_step(self.model, self.data)

    def take(self, source, index: int, slot: int) -> None:
        """Simulate the pick: move the carton far away, at rest on the floor."""
        h = source._handles[index]
        self.data.qpos[h.qpos : h.qpos + 7] = [8.0 + 0.8 * slot, 8.0, 0.2, 1, 0, 0, 0]
        self.data.qvel[h.dof : h.dof + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)


def _line(level: int, seed: int = 1, **overrides):
    draws = draw_load(level, seed)
    cell = load_config().cell
    cls, params = (
        (TableSource, table_params(cell))
        if level < 20
        else (ConveyorSource, conveyor_params(cell))
    )
    params = dataclasses.replace(params, **overrides)
    return cls(draws, lambda i, a: staging_jitter(level, seed, i, a), params), draws


@dataclass(frozen=True)
class _Draw:
    index: int
    package_id: str
    dims: tuple[float, float, float]
    mass: float = 3.0
    cog_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rgba: tuple[float, float, float, float] = (0.7, 0.5, 0.3, 1.0)
    friction: tuple[float, float, float] = (0.95, 0.01, 0.001)


# -- conveyor ------------------------------------------------------------------------------------


@pytest.mark.sim
@pytest.mark.parametrize('level', [21, 22, 23])
def test_conveyor_delivers_every_carton_upright_at_rest_at_the_station(level):
    src, draws = _line(level)
    world = _World(src)
    p = src.p
    offsets = src.staged_offsets()
    for slot, draw in enumerate(draws):
        t0 = world.time
        got = src.present(world)
        assert got is not None, f'level {level}: {draw.package_id} jammed'
        assert (got.package_id, got.index) == (draw.package_id, draw.index)
        h = src._handles[got.index]
        pos = h.position(world.data)
        assert abs(pos[0] - p.station[0]) <= 0.020
        # Across the belt it keeps the staged offset: the belt carries it straight.
        assert abs(pos[1] - (p.station[1] + offsets[got.index][0])) <= 0.010
        assert math.degrees(h.tilt(world.data)) < 2.0
        np.testing.assert_allclose(pos[2], p.top + draw.dims[2] / 2, atol=0.003)
        corners = h.bottom_corners(world.data)
        assert np.all(corners[:, 0] >= p.belt_x[0]) and np.all(corners[:, 0] <= p.belt_x[1])
        assert np.all(np.abs(corners[:, 1] - p.belt_y) <= p.belt_width / 2)
        assert h.lid_speed(world.model, world.data) < p.rest_speed
        assert world.time - t0 < p.timeout_s
        assert src.present(world) == got  # presenting again steps nothing and repeats
        world.take(src, got.index, slot)
        src.release(got.package_id)
    state = src.state()
    assert (state.pending, state.exhausted, state.jammed) == (0, True, False)
    assert src.present(world) is None
    assert src.forecast() == []


@pytest.mark.sim
def test_conveyor_times_out_as_jammed_when_the_carton_never_settles():
    src, _ = _line(21, timeout_s=20.0)
    target = {}

    def spin(model, data):
        # Keep carton 0 spinning about its vertical axis for ever: never at rest.
        if not target:
            target['dof'] = src._handles[0].dof
        data.qvel[target['dof'] + 5] = 2.0

    world = _World(src, disturb=spin)
    assert src.present(world) is None
    state = src.state()
    assert state.jammed and not state.exhausted and state.pending == 4
    np.testing.assert_allclose(world.time, 20.0, atol=0.05)
    t = world.time
    assert src.present(world) is None
    assert world.time == t  # a jammed line does not step


@pytest.mark.sim
def test_conveyor_jams_when_the_station_lies_past_the_belt_end():
    # The belt keeps running towards a station it can never reach: the carton falls off the end.
    src, _ = _line(21, station=(0.45, -0.80), timeout_s=20.0)
    world = _World(src)
    assert src.present(world) is None
    assert src.state().jammed
    assert src._handles[0].position(world.data)[2] < 0.3  # on the floor, not on the belt


@pytest.mark.sim
def test_release_rejects_a_carton_that_is_not_presented():
    src, draws = _line(21)
    with pytest.raises(
        SourceError, match=r"release\('std_m-00'\) but the presented carton is None"
    ):
        src.release(draws[0].package_id)


def test_side_guides_keep_a_turned_carton_inside_the_lane():
    big = _Draw(0, 'random-00', (0.535, 0.356, 0.219))
    src = ConveyorSource([big], lambda i, a: (0.0, 0.03, math.radians(25.0)))
    dy, yaw = src.staged_offsets()[0]
    lane = src.p.belt_width - 2 * src.p.guide_margin
    span = 0.535 * abs(math.sin(yaw)) + 0.356 * abs(math.cos(yaw))
    assert span <= lane + 1e-9
    assert 0.0 < yaw < math.radians(25.0)
    assert abs(dy) <= (lane - span) / 2 + 1e-9


# -- table ---------------------------------------------------------------------------------------


@pytest.mark.sim
def test_table_level_11_carton_arrives_at_rest_on_the_table_centre():
    src, draws = _line(11)
    world = _World(src)
    got = src.present(world)
    assert got is not None and got.package_id == draws[0].package_id
    h = src._handles[got.index]
    table = src.p.table
    pos = h.position(world.data)
    assert np.hypot(*(pos[:2] - np.array(table.centre))) <= 0.020
    np.testing.assert_allclose(pos[2], table.top + draws[0].dims[2] / 2, atol=0.003)
    corners = h.bottom_corners(world.data)
    assert np.all(np.abs(corners[:, 0] - table.centre[0]) <= table.half_size[0])
    assert np.all(np.abs(corners[:, 1] - table.centre[1]) <= table.half_size[1])
    assert math.degrees(h.tilt(world.data)) < 2.0
    assert h.lid_speed(world.model, world.data) < src.p.rest_speed
    assert src.state().pending == 4


def _after_the_first_take(src) -> _World:
    """A world whose source presented its first carton, which the arm then took."""
    world = _World(src)
    first = src.present(world)
    assert first is not None
    world.take(src, first.index, 0)
    src.release(first.package_id)
    return world


@pytest.mark.sim
@pytest.mark.parametrize('level', [11, 21])
def test_a_carton_that_rested_while_the_arm_was_away_is_presented_at_once(level):
    # The line watches the station all along (RestWatch): after the arm takes a carton and
    # is busy elsewhere long enough for the next to arrive and rest, present() steps nothing.
    src, draws = _line(level)
    world = _after_the_first_take(src)
    world.step(int(round(12.0 / 0.002)))  # 12 s elsewhere: the next arrives and rests
    t = world.time
    got = src.present(world)
    assert got is not None and got.package_id == draws[1].package_id
    assert world.time == t
    h = src._handles[got.index]
    assert h.lid_speed(world.model, world.data) < src.p.rest_speed
    assert abs(h.position(world.data)[0] - src.p.station[0]) <= src.p.station_tol


@pytest.mark.sim
def test_a_carton_still_on_its_way_is_waited_for_until_it_rests():
    # Asked for at once after the take, the next carton is still rolling in: present() steps
    # until it has rested rest_time at the station, as before the line watched all along.
    src, draws = _line(21)
    world = _after_the_first_take(src)
    t = world.time
    got = src.present(world)
    assert got is not None and got.package_id == draws[1].package_id
    assert world.time - t >= src.p.rest_time


def test_rest_watch_needs_the_hold_and_restarts_on_motion():
    from palletizer.sim.sources.base import RestWatch

    w = RestWatch(0.015, 0.10, period=0.02)
    times = [round(0.002 * k, 3) for k in range(0, 200)]
    fed = [t for t in times if w.due(t)]
    assert fed[:3] == [0.0, 0.02, 0.04]  # one sample every period, whatever the step
    for t in fed[:5]:
        w.update(t, 0.001)
    assert not w.resting  # 0.08 s below the threshold: not yet the 0.10 s hold
    w.update(fed[5], 0.001)
    assert w.resting
    w.update(fed[6], math.inf)  # moved (or left the station): start again
    assert not w.resting
    w.update(fed[7], 0.001)
    w.clear()
    assert not w.resting and not w.due(fed[7] + 0.01)  # clearing keeps the cadence


# -- truck ---------------------------------------------------------------------------------------


def _truck(level: int, seed: int) -> TruckSource:
    cfg = load_config()
    return make_source(cfg.level(level), seed, cell=cfg.cell)


@pytest.mark.sim
@pytest.mark.parametrize('seed', [1, 2, 3])
def test_truck_always_presents_the_highest_carton(seed):
    src = _truck(31, seed)
    world = _World(src)
    assert src.state().extras['columns'] == src.plan.columns
    for slot in range(5):
        ahead = src.forecast()
        got = src.present(world)
        assert got is not None
        tops = {i: src._handles[i].top(world.data) for i in src._pending_ids()}
        others = [t for i, t in tops.items() if i != got.index]
        assert tops[got.index] >= max(others, default=0.0) - src.p.tie_band
        assert src.forecast()[0] == got.package_id
        assert sorted(ahead) == sorted(src.forecast())
        assert src.state().extras['load_drift_mm'] < 2.0
        world.take(src, got.index, slot)
        src.release(got.package_id)
    assert src.state().exhausted and src.present(world) is None


@pytest.mark.sim
def test_a_truck_load_at_rest_since_the_last_take_is_presented_at_once():
    src = _truck(31, 1)
    world = _World(src)
    t = world.time
    first = src.present(world)
    assert first is not None and world.time - t >= src.p.rest_time  # the load settles first
    world.take(src, first.index, 0)
    src.release(first.package_id)
    world.step(100)  # 0.2 s: the load has stood still longer than rest_time
    t = world.time
    got = src.present(world)
    assert got is not None and world.time == t
    assert got.package_id == src.forecast()[0]


def test_truck_plan_respects_bay_ceiling_column_size_and_support():
    p = TruckParams()
    for seed in range(1, 6):
        draws = draw_load(33, seed)
        _check_truck_plan(plan_truck_load([d.dims for d in draws], seed, True, p), draws, p)


def test_a_load_no_default_draw_stands_is_tried_with_other_column_counts():
    # Level 33 seed 7 in the cell's bay: none of the 25 draws with 4 floor columns stands it.
    p = truck_params(load_config().cell)
    draws = draw_load(33, 7)
    plan = plan_truck_load([d.dims for d in draws], 7, True, p)
    assert plan.attempt > p.max_redraws and plan.columns != 4
    _check_truck_plan(plan, draws, p)


def test_a_load_no_draw_stands_in_footprint_order_lets_a_carton_wait_for_the_others():
    # Level 33 seed 45: after the biggest lids have built one column, a 533 x 165 mm carton
    # finds no column with 62 % support under the ceiling; a later 289 x 283 mm carton opens
    # the column it stands on. Few re-draws keep the test short; the failing first pass is
    # what the cell's 24 re-draws meet as well.
    p = dataclasses.replace(truck_params(load_config().cell), max_redraws=2)
    draws = draw_load(33, 45)
    dims = [d.dims for d in draws]
    plan = plan_truck_load(dims, 45, True, p)
    first_pass = 5 * (p.max_redraws + 1) - 4  # draws of the five column counts
    assert plan.attempt >= first_pass
    _check_truck_plan(plan, draws, p)
    # The carton that waits stands above the one that opened its column.
    by_index = {s.index: s for s in plan.slots}
    waited = next(
        i for i, d in enumerate(dims) if d[:2] == pytest.approx((0.533, 0.165), abs=1e-3)
    )
    assert by_index[waited].tier > 0


def test_a_load_with_two_band_lids_equally_near_the_robot_is_drawn_again():
    # Level 33 seed 6, draw 1: after two cartons, two lids in the tie band stood 1.8 mm apart
    # in distance to the robot; the camera calls under 5 mm a draw (no_detection). The load
    # is read where the loader's disorder leaves it.
    p = truck_params(load_config().cell)
    draws = draw_load(33, 6)
    dims = [d.dims for d in draws]
    plan = plan_truck_load(dims, 6, True, p)
    assert plan.attempt == 2
    _check_truck_plan(plan, draws, p)
    staged = [
        (
            s.index,
            s.column,
            s.tier,
            s.centre[0],
            s.centre[1],
            s.centre[2] - dims[s.index][2] / 2 - p.drop * (s.tier + 1),
            False,
        )
        for s in plan.slots
    ]
    assert _edge_clearance(staged, dims, p) >= p.tie_clear
    rng = random.Random(6 * 1_000_003 + 1)
    first = _try_plan(dims, rng, p, True, 1)
    assert first is not None
    assert _edge_clearance(_as_placed(first, _slots(first, dims, rng, p, True)), dims, p) < 0.002


def _check_truck_plan(plan, draws, p: TruckParams) -> None:
    assert sorted(s.index for s in plan.slots) == list(range(len(draws)))
    by_col: dict[int, list] = {}
    for s in plan.slots:
        by_col.setdefault(s.column, []).append(s)
    assert len(by_col) == plan.columns
    for col in by_col.values():
        col.sort(key=lambda s: s.tier)
        assert len(col) <= p.max_column_items
        for s in col:
            length, width, height = draws[s.index].dims
            assert s.centre[2] + height / 2 <= p.floor + p.max_stack_height + 0.01
            ex = abs(math.cos(s.yaw)) * length + abs(math.sin(s.yaw)) * width
            ey = abs(math.sin(s.yaw)) * length + abs(math.cos(s.yaw)) * width
            assert s.centre[0] - ex / 2 >= p.origin[0] - 1e-9
            assert s.centre[0] + ex / 2 <= p.origin[0] + p.size[0] + 1e-9
            assert s.centre[1] - ey / 2 >= p.origin[1] - 1e-9
            assert s.centre[1] + ey / 2 <= p.origin[1] + p.size[1] + 1e-9
        for below, above in zip(col[:-1], col[1:], strict=True):
            # Supported: the centre of the upper carton lies over the lower one.
            lb = draws[below.index].dims
            half_x = 0.5 * (abs(math.cos(below.yaw)) * lb[0] + abs(math.sin(below.yaw)) * lb[1])
            half_y = 0.5 * (abs(math.sin(below.yaw)) * lb[0] + abs(math.cos(below.yaw)) * lb[1])
            assert abs(above.centre[0] - below.centre[0]) <= half_x
            assert abs(above.centre[1] - below.centre[1]) <= half_y


def test_truck_plan_is_fixed_by_the_seed():
    dims = [d.dims for d in draw_load(32, 4)]
    a = plan_truck_load(dims, 4, True)
    assert a == plan_truck_load(dims, 4, True)
    assert a != plan_truck_load(dims, 5, True)


def test_truck_plan_refuses_a_load_that_cannot_stand_in_the_bay():
    slabs = [(0.70, 0.80, 0.50)] * 4  # one per floor, never stackable under the ceiling
    with pytest.raises(SourceError, match='truck: no plan for 4 cartons'):
        plan_truck_load(slabs, 1, False)


# -- determinism and wiring ----------------------------------------------------------------------


def _poses_after_presenting(level: int, seed: int, count: int) -> np.ndarray:
    cfg = load_config()
    src = make_source(cfg.level(level), seed, cell=cfg.cell)
    world = _World(src)
    for slot in range(count):
        got = src.present(world)
        assert got is not None
        world.take(src, got.index, slot)
        src.release(got.package_id)
    assert src.present(world) is not None
    return world.data.qpos.copy()


@pytest.mark.sim
@pytest.mark.parametrize('level', [22, 32])
def test_same_level_and_seed_give_identical_poses_after_presenting(level):
    first = _poses_after_presenting(level, 2, 1)
    np.testing.assert_array_equal(first, _poses_after_presenting(level, 2, 1))


def test_make_source_builds_the_source_of_the_level():
    cfg = load_config()
    kinds = {lv: make_source(cfg.level(lv), 1, cell=cfg.cell).kind for lv in (11, 21, 31)}
    assert kinds == {11: 'table', 21: 'conveyor', 31: 'truck'}
    assert all(isinstance(make_source(cfg.level(lv), 1), Source) for lv in (12, 22, 32))


def _edge_gaps(plan: TruckPlan, draws, p: TruckParams) -> list[float]:
    """At each step of the plan's unloading (the source's order on the planned tops), the
    distances to the tie band's edge [m] of the pending tops nearer the robot than every other
    top in the band (the ones whose side of the edge decides what comes next)."""
    top = {
        s.index: s.centre[2] - p.drop * (s.tier + 1) + draws[s.index].dims[2] / 2
        for s in plan.slots
    }
    xy = {s.index: s.centre[:2] for s in plan.slots}

    def key(i):
        return (math.dist(xy[i], p.tie_point), xy[i][0], i)

    rest, gaps = set(top), []
    while rest:
        highest = max(rest, key=top.get)
        edge = top[highest] - p.tie_band
        tied = [i for i in rest if top[i] >= edge]
        gaps += [
            abs(top[i] - edge)
            for i in rest
            if i != highest and key(i) < min(key(j) for j in tied if j != i)
        ]
        rest.remove(min(tied, key=key))
    return gaps or [math.inf]


def test_a_load_whose_unloading_a_camera_cannot_read_is_drawn_again():
    p = truck_params(load_config().cell)
    blind = dataclasses.replace(p, tie_clear=0.0)
    # Level 33 seed 12: the first draw has a top within tie_clear of the band's edge at some
    # step; a later draw is clear of it.
    draws = draw_load(33, 12)
    dims = [d.dims for d in draws]
    before = plan_truck_load(dims, 12, True, blind)
    assert min(_edge_gaps(before, draws, p)) < p.tie_clear
    plan = plan_truck_load(dims, 12, True, p)
    assert plan.attempt > before.attempt
    assert min(_edge_gaps(plan, draws, p)) >= p.tie_clear - 1e-9
    _check_truck_plan(plan, draws, p)
    # Level 33 seed 4: the second-highest top stands 27 mm under the highest (3 mm inside the
    # 30 mm band) in every draw: the first of the clearest draws is taken, here the first.
    draws = draw_load(33, 4)
    dims = [d.dims for d in draws]
    before = plan_truck_load(dims, 4, True, blind)
    assert plan_truck_load(dims, 4, True, p) == before
    assert min(_edge_gaps(before, draws, p)) < p.tie_clear
