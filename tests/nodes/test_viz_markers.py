"""The markers RViz shows: stable namespaces and ids, a new episode clears, the height map's cells."""

from __future__ import annotations

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
