"""Accumulating lines: the next carton waits at the hold point while one is presented."""

from __future__ import annotations

import dataclasses
import math

import mujoco
import numpy as np
import pytest
from palletizer.sim.sources import ConveyorSource, TableSource, conveyor_params, table_params

from tests.sim.test_sources import _Draw, _line, _World

_TICK = 10  # physics steps per check: 20 ms at the 2 ms step of _World


def _front(src, world, index: int) -> float:
    h = src._handles[index]
    return float(h.position(world.data)[0] + h.half_extents(world.data)[0])


def _back(src, world, index: int) -> float:
    h = src._handles[index]
    return float(h.position(world.data)[0] - h.half_extents(world.data)[0])


def _touching(src, world, a: int, b: int) -> bool:
    """True when MuJoCo has a contact between cartons `a` and `b`."""
    m, d = world.model, world.data
    bodies = {src._handles[a].body, src._handles[b].body}
    return any(
        {int(m.geom_bodyid[c.geom1]), int(m.geom_bodyid[c.geom2])} == bodies
        for c in d.contact[: d.ncon]
    )


def _hold_then_release(src, world, hold_s: float = 15.0):
    """Present carton 0, keep it presented `hold_s` s while carton 1 accumulates, then take
    it; returns (carton 1's trace while held, sim time from release to carton 1 presented)."""
    first = src.present(world)
    assert first is not None and first.index == 0
    p = src.p
    h0 = src._handles[0]
    at = h0.position(world.data)
    trace = []
    for _ in range(round(hold_s / 0.002 / _TICK)):
        world.step(_TICK)
        assert not _touching(src, world, 0, 1), f't = {world.time:.2f}: carton 1 touches carton 0'
        trace.append((world.time, _front(src, world, 1)))
    # The presented carton was never pushed or dragged: still at rest where it was presented.
    np.testing.assert_allclose(h0.position(world.data), at, atol=0.002)
    assert h0.lid_speed(world.model, world.data) < p.rest_speed
    world.take(src, 0, 0)
    src.release(first.package_id)
    t0 = world.time
    second = src.present(world)
    assert second is not None and second.index == 1
    return trace, world.time - t0


@pytest.mark.sim
@pytest.mark.parametrize('level', [11, 16, 21, 23])
def test_a_running_line_starts_with_one_carton_at_the_station_and_one_at_the_hold_point(level):
    src, draws = _line(level)
    world = _World(src)
    p = src.p
    hold = p.hold_front
    assert hold is not None
    offsets = src.staged_offsets()
    # Carton 0 at the station, carton 1 at the hold point less the brake lead, each with its
    # seeded jitter, 1 mm above the deck.
    for index, x_ref in ((0, None), (1, hold - p.brake_lead)):
        h = src._handles[index]
        dy, yaw = offsets[index]
        pos = h.position(world.data)
        if x_ref is None:
            np.testing.assert_allclose(pos[0], p.station[0], atol=1e-6)
        else:
            np.testing.assert_allclose(_front(src, world, index), x_ref, atol=1e-6)
        z = p.top + draws[index].dims[2] / 2 + 0.001
        np.testing.assert_allclose(pos[1:], [p.belt_y + dy, z])
        rot = h.rotation(world.data)
        np.testing.assert_allclose(math.atan2(rot[1, 0], rot[0, 0]), yaw, atol=1e-9)
        corners = h.bottom_corners(world.data)
        assert np.all(np.abs(corners[:, 1] - p.belt_y) <= p.belt_width / 2)
    # Carton 1 stands wholly on the deck(s) upstream of the station's.
    station_deck = next(x0 for _, x0, x1 in p.sections if x0 <= p.station[0] <= x1)
    assert np.all(src._handles[1].bottom_corners(world.data)[:, 0] < station_deck)
    # The rest wait in the store, hidden behind its mouth, the head at the store hold point.
    assert p.store_hold_front < p.mouth_x
    np.testing.assert_allclose(
        _front(src, world, 2), p.store_hold_front - p.store_brake_lead, atol=1e-6
    )
    for d in draws[2:]:
        assert _front(src, world, d.index) < p.mouth_x
    # After 0.2 s both stand level on their decks, neither moving.
    world.step(100)
    for index in (0, 1):
        h = src._handles[index]
        np.testing.assert_allclose(
            h.position(world.data)[2], p.top + draws[index].dims[2] / 2, atol=0.002
        )
        assert math.degrees(h.tilt(world.data)) < 1.0
        assert abs(world.data.qvel[h.dof]) < 0.02


@pytest.mark.sim
@pytest.mark.parametrize('level', [11, 21])
def test_the_first_present_only_waits_for_the_carton_at_the_station_to_rest(level):
    src, draws = _line(level)
    world = _World(src)
    got = src.present(world)
    assert got is not None and got.index == 0
    assert world.time < 0.5  # the 0.1 s rest check after the reset's 1 mm drop


@pytest.mark.sim
@pytest.mark.parametrize('level', [11, 16, 21, 23])
def test_next_carton_waits_at_the_hold_point_while_one_is_presented(level):
    src, draws = _line(level)
    world = _World(src)
    p = src.p
    trace, dt = _hold_then_release(src, world)
    # Carton 1 came off the elevator and stopped at the hold point before the release.
    t_at = next(t for t, front in trace if front >= p.hold_front - p.brake_lead - 0.002)
    settled = [front for t, front in trace if t >= t_at + 0.5]
    assert settled, 'carton 1 reached the hold point too late to be seen at rest'
    assert max(settled) <= p.hold_front + 0.002
    assert max(settled) - min(settled) < 0.002  # stopped, not creeping
    # After the release it covers only hold point -> station; from the elevator (the old
    # behaviour) it was at least platform centre -> station.
    old = (p.station[0] - 0.5 * sum(p.platform_x)) / p.speed
    new = (p.station[0] - (p.hold_front - draws[1].dims[0] / 2)) / p.speed
    assert dt < new + 1.0
    assert dt < 0.6 * old


@pytest.mark.sim
@pytest.mark.parametrize('level', [11, 21])
def test_held_carton_rests_upright_on_its_deck_clear_of_the_presented_one(level):
    src, draws = _line(level)
    world = _World(src)
    p = src.p
    first = src.present(world)
    assert first is not None
    world.step(round(14.0 / 0.002))
    h1 = src._handles[1]
    assert h1.lid_speed(world.model, world.data) < p.rest_speed
    assert math.degrees(h1.tilt(world.data)) < 2.0
    np.testing.assert_allclose(
        h1.position(world.data)[2], p.top + draws[1].dims[2] / 2, atol=0.003
    )
    corners = h1.bottom_corners(world.data)
    # Entirely upstream of the station's deck and of the presented carton.
    station_deck = next(x0 for name, x0, x1 in p.sections if x0 <= p.station[0] <= x1)
    assert np.all(corners[:, 0] < station_deck)
    gap = _back(src, world, 0) - _front(src, world, 1)
    assert gap >= p.hold_margin
    # The elevator has fetched carton 2 meanwhile and holds it up at belt height.
    h2 = src._handles[2]
    np.testing.assert_allclose(h2.position(world.data)[2], p.top + draws[2].dims[2] / 2, atol=0.01)
    assert p.platform_x[0] < h2.position(world.data)[0] < p.platform_x[1]
    # Carton 3 waits at rest at the mouth of the store, still hidden, ready to load.
    h3 = src._handles[3]
    front3 = _front(src, world, 3)
    assert p.store_hold_front - p.brake_lead - 0.002 <= front3 <= p.store_hold_front + 0.002
    assert front3 < p.mouth_x
    assert h3.lid_speed(world.model, world.data) < p.rest_speed


@pytest.mark.sim
@pytest.mark.parametrize('cls', [TableSource, ConveyorSource])
def test_the_largest_turned_footprint_waits_clear_of_the_presented_carton(cls):
    # 0.55 x 0.40 at up to 30 deg: the largest footprint the lines are sized for.
    big = [_Draw(i, f'random-{i:02d}', (0.55, 0.40, 0.30)) for i in range(3)]
    params = table_params() if cls is TableSource else conveyor_params()
    src = cls(big, lambda i, a: (0.0, 0.0, math.radians(30.0 if i % 2 else -30.0)), params)
    world = _World(src)
    trace, dt = _hold_then_release(src, world, hold_s=16.0)
    p = src.p
    assert p.hold_front - p.brake_lead - 0.002 <= trace[-1][1] <= p.hold_front + 0.002
    assert dt < 4.0


@pytest.mark.sim
def test_every_carton_still_arrives_and_the_line_stays_deterministic():
    def run():
        src, draws = _line(16)
        world = _World(src)
        for slot, d in enumerate(draws[:5]):
            got = src.present(world)
            assert got is not None and got.index == d.index
            world.step(round(6.0 / 0.002))  # the arm's reach: the next one accumulates
            world.take(src, got.index, slot)
            src.release(got.package_id)
        return world.data.qpos.copy(), world.time

    a, b = run(), run()
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1] == b[1]


def test_hold_point_lies_upstream_of_the_station_deck():
    for params in (table_params(), conveyor_params()):
        decks = params.sections
        at = max(i for i, d in enumerate(decks) if d[1] <= params.station[0])
        assert params.hold_front == pytest.approx(decks[at - 1][2] - params.hold_margin)
        # A carton centred on the station with the largest footprint (0.68 m) stays clear.
        assert params.station[0] - 0.34 - params.brake_lead - params.hold_front > 0.03
    # A station on the first deck leaves no hold point: the line behaves as before.
    early = dataclasses.replace(conveyor_params(), station=(-1.2, -0.80))
    assert early.hold_front is None


@pytest.mark.sim
def test_a_station_on_the_first_belt_delivers_one_at_a_time_from_the_elevator():
    # No section upstream of the station's to hold on: every carton comes from the store.
    src, draws = _line(21, station=(-1.2, -0.80))
    assert src.p.hold_front is None
    world = _World(src)
    # The first carton starts at the station, the next in the store.
    assert abs(src._handles[0].position(world.data)[0] - (-1.2)) < 1e-6
    assert _front(src, world, 1) < src.p.mouth_x
    for slot, d in enumerate(draws):
        got = src.present(world)
        assert got is not None and got.index == d.index
        assert abs(src._handles[d.index].position(world.data)[0] - (-1.2)) <= src.p.station_tol
        world.take(src, got.index, slot)
        src.release(got.package_id)
    assert src.state().exhausted


@pytest.mark.sim
@pytest.mark.parametrize('cls', [TableSource, ConveyorSource])
def test_a_one_carton_load_starts_at_the_station_with_an_empty_store(cls):
    one = [_Draw(0, 'random-00', (0.40, 0.30, 0.20))]
    src = cls(one, None, table_params() if cls is TableSource else conveyor_params())
    world = _World(src)  # the store still compiles with a queue belt of positive length
    got = src.present(world)
    assert got is not None and world.time < 0.5
    world.take(src, 0, 0)
    src.release(got.package_id)
    assert src.state().exhausted and src.present(world) is None


def _put(world, src, index: int, xyz) -> None:
    """Hold carton `index` at xyz, level, at rest (as the gripper holds it)."""
    h = src._handles[index]
    world.data.qpos[h.qpos : h.qpos + 7] = [*xyz, 1, 0, 0, 0]
    world.data.qvel[h.dof : h.dof + 6] = 0.0
    mujoco.mj_forward(world.model, world.data)


@pytest.mark.sim
@pytest.mark.parametrize('level', [11, 21])
def test_the_next_carton_rolls_in_only_once_the_taken_one_has_left_the_station(level):
    src, draws = _line(level)
    world = _World(src)
    p = src.p
    first = src.present(world)
    assert first is not None and first.index == 0
    src.release(first.package_id)
    h0 = draws[0].dims[2]
    tallest = max(d.dims[2] for d in draws)
    # Lifted 0.15 m above the station, its bottom lower than the tallest carton: the sensor
    # sees it and carton 1 stays at the hold point.
    low = (p.station[0], p.belt_y, p.top + 0.15 + h0 / 2)
    assert 0.15 < tallest + 0.05
    x1 = _front(src, world, 1)
    for _ in range(50):  # 1 s, the carton re-held every tick (gravity would drop it)
        _put(world, src, 0, low)
        world.step(_TICK)
    assert abs(_front(src, world, 1) - x1) < 0.002
    assert not src._station_clear(world.data)
    # Carried high over the station, or away over the pallet: clear.
    _put(world, src, 0, (p.station[0], p.belt_y, p.top + tallest + 0.06 + h0 / 2))
    assert src._station_clear(world.data)
    _put(world, src, 0, (0.6, 0.0, 0.5))
    assert src._station_clear(world.data)
    got = src.present(world)
    assert got is not None and got.index == 1


@pytest.mark.sim
@pytest.mark.parametrize('seed', [18, 20])
def test_a_short_carton_behind_the_one_loading_stays_off_the_platform(seed):
    """Level 17 seeds 18 and 20: the store head (a mini_s, 190 mm) followed the carton loading
    onto the elevator along the infeed and stopped 11 mm over the platform; the lift caught its
    front edge and threw it to the floor, and the line jammed after 3 cartons. The one behind
    now waits at the hold front: every carton arrives, and each one waiting in the store
    stays clear of the platform."""
    src, draws = _line(17, seed)
    world = _World(src)
    p = src.p
    for slot, d in enumerate(draws[:6]):
        got = src.present(world)
        assert got is not None and got.index == d.index, (slot, src.state())
        for _ in range(round(8.0 / 0.002 / _TICK)):  # the arm's cycle: the line runs on
            world.step(_TICK)
            for i in src._queue:
                assert _front(src, world, i) < p.platform_x[0], (world.time, i)
        world.take(src, got.index, slot)
        src.release(got.package_id)
