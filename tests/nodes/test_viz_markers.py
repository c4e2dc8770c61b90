"""The markers RViz shows: stable namespaces and ids, a new episode clears, the height map's cells."""

from __future__ import annotations

import dataclasses
import math

import pytest
from builtin_interfaces.msg import Time
from palletizer.core.contracts import PalletGeometry
from palletizer.nodes.viz_markers import FRAME, MarkerState
from palletizer_msgs.msg import HeightMap, PalletState, Placement, Pose4
from visualization_msgs.msg import Marker


def _placement(seq: int, placed: bool = True) -> Placement:
    return Placement(
        seq=seq,
        package_id=f'p{seq}',
        dims_m=[0.4, 0.3, 0.2],
        planned_pose=Pose4(x=0.1 * seq, y=0.0, z=0.1, yaw=math.pi / 2),
        actual_pose=Pose4(x=0.1 * seq + 0.002, y=0.0, z=0.1, yaw=math.pi / 2),
        placed=placed,
    )


def _keys(state: MarkerState) -> list[tuple[str, int, int]]:
    return [(m.ns, m.id, m.action) for m in state.array(Time()).markers]


def test_placements_keep_their_ids_and_a_new_episode_clears_them():
    st = MarkerState(PalletGeometry())
    st.on_placement(_placement(0))
    st.on_placement(_placement(1, placed=False))
    first = st.array(Time()).markers
    assert [(m.ns, m.id) for m in first] == [
        ('pallet', 0),
        ('planned', 0),
        ('actual', 0),
        ('planned', 1),
        ('actual', 1),
    ]
    assert all(m.header.frame_id == FRAME and m.action == Marker.ADD for m in first)
    # World frame: x from the pallet centre, z above the deck (the carton's centre).
    planned0 = first[1]
    assert planned0.pose.position.x == pytest.approx(PalletGeometry().centre_xy[0])
    assert planned0.pose.position.z == pytest.approx(PalletGeometry().deck_z + 0.1)
    assert planned0.pose.orientation.z == pytest.approx(math.sin(math.pi / 4))
    assert first[4].color.r > first[4].color.g  # not placed: red
    assert _keys(st) == [(ns, i, Marker.ADD) for ns, i in [(m.ns, m.id) for m in first]]
    st.on_placement(_placement(0))  # seq went back: the next episode
    assert _keys(st)[0][2] == Marker.DELETEALL
    assert [(ns, i) for ns, i, _ in _keys(st)] == [('pallet', 0), ('planned', 0), ('actual', 0)]


def test_cog_and_heightmap_markers():
    st = MarkerState(PalletGeometry())
    st.on_state(PalletState(after_seq=0))
    hm = HeightMap(ny=2, nx=3, origin_x=0.0, origin_y=-0.4, cell_size=0.01)
    hm.cells = [0.0, 0.2, 0.3, 0.0, 0.0, 0.4]
    hm.observed = [True, True, False, False, True, True]
    st.on_heightmap(hm)
    markers = {m.ns: m for m in st.array(Time()).markers}
    assert markers['cog'].type == Marker.SPHERE
    grid = markers['heightmap']
    assert grid.type == Marker.CUBE_LIST and len(grid.points) == 4 == len(grid.colors)
    assert grid.points[1].z == pytest.approx(PalletGeometry().deck_z + 0.2)
    assert grid.points[3].x == pytest.approx(0.025) and grid.points[3].y == pytest.approx(-0.385)


def test_plan_markers_show_the_ranked_candidates_the_choice_and_what_the_planner_believes():
    from palletizer.core.contracts import HeightMap as Map
    from palletizer.core.contracts import PackageSpec
    from palletizer.core.contracts import Placement as Placed
    from palletizer.core.planning import build_planner
    from palletizer.nodes.plan_markers import MAX_CANDIDATES, PlanMarkers

    planner = build_planner('heuristic')
    spec = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2, (0.01, 0.0, 0.0))
    flat = Map.flat(PalletGeometry())
    result = planner.choose(spec, flat, None)
    pm = PlanMarkers()
    got = pm.array(Time(), spec, result.plan, planner, flat, None).markers
    cands = [m for m in got if m.ns == 'candidates']
    assert [m.id for m in cands] == list(range(MAX_CANDIDATES))
    assert cands[0].color.g > cands[-1].color.g  # best green, the last shown red
    (chosen,) = [m for m in got if m.ns == 'chosen']
    xs = [p.x for p in chosen.points]
    assert min(xs) < result.plan.position[0] < max(xs)
    # Nothing placed yet: no believed centre of mass, no support polygon.
    assert {(m.ns, m.action) for m in got if m.ns in ('cog_measured', 'support')} == {
        ('cog_measured', Marker.DELETE),
        ('support', Marker.DELETE),
    }
    x, y, z = result.plan.position
    pose = (x - 0.6, y, z - PalletGeometry().deck_z, result.plan.yaw)
    planner.record(
        Placed(0, 'a', 'std_m', 4.2, (0.42, 0.30, 0.18), 1, pose, pose, 0.0, 0.0, 1.0, 0.0, True)
    )

    c = planner.candidates(spec, flat, None)
    arrays = ('score', 'z_base', 'x', 'y', 'yaw', 'i0', 'j0', 'support', 'terms')
    few = dataclasses.replace(c, **{f: getattr(c, f)[:3] for f in arrays})

    class Fewer:  # a plan with three candidates left: the other ids are deleted
        book = planner.book

        def candidates(self, *_):
            return few

    got = pm.array(Time(), spec, None, Fewer(), flat, None).markers
    by_ns: dict = {}
    for m in got:
        by_ns.setdefault(m.ns, []).append((m.id, m.action))
    assert by_ns['candidates'] == [(k, Marker.ADD) for k in range(3)] + [
        (k, Marker.DELETE) for k in range(3, MAX_CANDIDATES)
    ]
    assert by_ns['chosen'] == [(0, Marker.DELETE)]
    assert by_ns['cog_measured'] == [(0, Marker.ADD)] and by_ns['support'] == [(0, Marker.ADD)]


def test_the_held_carton_rides_on_the_tcp_from_pick_to_place():
    from palletizer_msgs.msg import EpisodeEvent

    st = MarkerState(PalletGeometry())
    st.on_event(EpisodeEvent(kind='pick', payload_json='{"dims_mm": [400.0, 300.0, 200.0]}'))
    (held,) = [m for m in st.array(Time()).markers if m.ns == 'held']
    assert (held.header.frame_id, held.action, held.frame_locked) == ('tcp', Marker.ADD, True)
    assert (held.scale.x, held.scale.y, held.scale.z) == pytest.approx((0.4, 0.3, 0.2))
    assert held.pose.position.z == pytest.approx(0.1)  # hanging below the cups
    st.on_event(EpisodeEvent(kind='place', payload_json='{}'))
    assert [(m.ns, m.action) for m in st.array(Time()).markers if m.ns == 'held'] == [
        ('held', Marker.DELETE)
    ]
    assert not [m for m in st.array(Time()).markers if m.ns == 'held']  # deleted once


def test_cycle_time_is_the_sim_time_between_places():
    from palletizer_msgs.msg import EpisodeEvent

    st = MarkerState(PalletGeometry())

    def ev(seq: int, ts: float, kind: str, seed: int = 1) -> float | None:
        return st.cycle_time(EpisodeEvent(run_id='r', seed=seed, seq=seq, ts=ts, kind=kind))

    assert ev(0, 2.0, 'perceive') is None
    assert ev(1, 5.0, 'pick') is None
    assert ev(2, 9.5, 'place') == pytest.approx(7.5)  # since the episode's first event
    assert ev(3, 12.0, 'perceive') is None
    assert ev(4, 20.0, 'place') == pytest.approx(10.5)
    assert ev(0, 30.0, 'perceive', seed=2) is None  # the next episode starts over
    assert ev(1, 36.0, 'place', seed=2) == pytest.approx(6.0)
