"""core.detection on rendered stations with known truth: table, conveyor, touching cartons, an
empty station and the trailer."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.core.contracts import Observation
from palletizer.core.detection import (
    Detection,
    DetectionError,
    DetectorParams,
    detect_station,
    detect_truck,
    detection_errors,
    held_bottom,
    held_height,
    held_segment,
)
from palletizer.core.detection.detector import _truck_choice
from palletizer.core.fusion import yaw_of_quat
from palletizer.core.heightmap_fusion import RobotBody
from palletizer.core.views import CameraView
from palletizer.sim.cell import Cell, CellOptions

CFG = load_config()
PARAMS = CFG.perception.detector
STATION = (-0.20, -0.80)
SURFACE = 0.58


def _cell(level: int, seed: int = 1) -> Cell:
    return Cell(CFG.level(level), seed, options=CellOptions.from_config(CFG.cell))


def _view(cell: Cell, seed: int = 0) -> CameraView:
    """The station camera with ~3 mm Gaussian depth noise and 1 % lost returns on top of
    whatever sensor model the cell applies."""
    f = cell.capture(['station'], 640, 480)['station']
    rng = np.random.default_rng(seed)
    d = f.depth + rng.normal(0.0, 0.003, f.depth.shape).astype(np.float32)
    d[rng.random(d.shape) < 0.01] = 0.0
    return CameraView('station', d, f.rgb, f.intrinsics.K, f.T_world_optical, f.time)


def _move(cell: Cell, package_id: str, xyz: tuple[float, float, float], yaw: float = 0.0) -> None:
    """Put a carton's free body at xyz [m] with yaw [rad], at rest."""
    m, d = cell.model, cell.data
    i = cell.ground_truth().cartons[package_id].index
    j = m.body(f'package_{i}').jntadr[0]
    a, v = m.jnt_qposadr[j], m.jnt_dofadr[j]
    d.qpos[a : a + 3] = xyz
    d.qpos[a + 3 : a + 7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
    d.qvel[v : v + 6] = 0.0
    mujoco.mj_forward(m, d)


def _errors(cell: Cell, det: Detection, package_id: str) -> dict[str, float]:
    t = cell.ground_truth().cartons[package_id]
    return detection_errors(det, t.pos, yaw_of_quat(t.quat), t.dims)


@pytest.mark.parametrize('level', [12, 22])
def test_presented_carton_is_found_within_3_mm_1_deg_5_mm(level):
    cell = _cell(level)
    pid = cell.present().package_id
    res = detect_station(_view(cell), PARAMS, SURFACE, STATION)
    cell.close()
    assert res.chosen is not None, res.reason
    assert res.chosen.confidence >= PARAMS.min_confidence
    e = _errors(cell, res.chosen, pid)
    assert e['pos_mm'] < 3.0 and e['yaw_deg'] < 1.0 and e['dims_mm'] < 5.0, e
    obs = res.chosen.observation(pid)
    assert obs.package_id == pid and obs.dims_guess[0] >= obs.dims_guess[1]
    assert -math.pi / 2 < obs.yaw <= math.pi / 2


def test_empty_station_gives_no_detection():
    cell = _cell(21)
    pid = cell.present().package_id
    _move(cell, pid, (3.0, 3.0, 0.5))
    res = detect_station(_view(cell), PARAMS, SURFACE, STATION)
    cell.close()
    assert res.chosen is None
    assert not any(
        d.confidence >= PARAMS.min_confidence
        and math.hypot(d.x - STATION[0], d.y - STATION[1]) < 0.2
        for d in res.detections
    )


def test_touching_twin_of_equal_height_is_not_merged_into_one_confident_carton():
    # Two std_m cartons (0.42 x 0.30 x 0.18, same colour) side by side, lids level: depth
    # cannot split them. Either the presented one is found alone or the station is ambiguous.
    cell = _cell(21)
    pid = cell.present().package_id
    other = next(p for p in cell.ground_truth().cartons if p != pid)
    z = cell.ground_truth().cartons[pid].pos[2]
    _move(cell, other, (-0.20, -0.80 + 0.300, float(z)))
    res = detect_station(_view(cell), PARAMS, SURFACE, STATION)
    cell.close()
    if res.chosen is None:
        assert res.ambiguous
    else:
        e = _errors(cell, res.chosen, pid)
        assert e['pos_mm'] < 3.0 and e['dims_mm'] < 5.0, e
    assert all(d.width <= PARAMS.envelope[1] for d in res.detections if d.confidence > 0)


def test_touching_neighbour_of_other_height_is_split_off():
    # A lower carton (small: 0.12 high) pushed against the presented std_m's long side.
    cell = _cell(12)
    pid = cell.present().package_id
    t = cell.ground_truth().cartons[pid]
    other = next(p for p in cell.ground_truth().cartons if p.startswith('small'))
    yaw = yaw_of_quat(t.quat)
    c, s = math.cos(yaw), math.sin(yaw)
    off = t.dims[1] / 2 + 0.22 / 2 + 0.0005  # across the width, touching
    _move(cell, other, (t.pos[0] - s * off, t.pos[1] + c * off, SURFACE + 0.06), yaw)
    res = detect_station(_view(cell), PARAMS, SURFACE, STATION)
    cell.close()
    assert res.chosen is not None, res.reason
    e = _errors(cell, res.chosen, pid)
    assert e['pos_mm'] < 3.0 and e['yaw_deg'] < 1.0 and e['dims_mm'] < 5.0, e


def test_truck_highest_carton_is_found():
    cell = _cell(31)
    pid = cell.present().package_id
    res = detect_truck([_view(cell)], PARAMS, CFG.cell.truck)
    cell.close()
    assert res.chosen is not None, res.reason
    e = _errors(cell, res.chosen, pid)
    assert e['pos_mm'] < 3.0 and e['yaw_deg'] < 1.0, e


def test_truck_highest_carton_sides_within_5_mm():
    # shoe_m-00 on a larger lid that reaches ~7 mm past one side: taking the strongest edge
    # near the outline read that lid's edge (13 mm wide).
    cell = _cell(31)
    pid = cell.present().package_id
    res = detect_truck([_view(cell)], PARAMS, CFG.cell.truck)
    cell.close()
    assert res.chosen is not None, res.reason
    assert _errors(cell, res.chosen, pid)['lw_mm'] < 5.0


def _truck_view(cell: Cell) -> CameraView:
    """The station camera with the cell's D415 model, as the episode captures it."""
    f = cell.capture(['station'], 640, 480)['station']
    return CameraView('station', f.depth, f.rgb, f.intrinsics.K, f.T_world_optical, f.time)


def test_truck_tie_rule_chooses_the_carton_the_source_presents():
    # Level 32 seed 1: its second carton is one of two column tops within the tie band.
    cell = _cell(32, 1)
    ties = 0
    for k in range(4):
        pid = cell.present().package_id
        res = detect_truck([_truck_view(cell)], PARAMS, CFG.cell.truck)
        assert res.chosen is not None, res.reason
        e = _errors(cell, res.chosen, pid)
        assert e['pos_mm'] < 8.0, (k, pid, e)
        ties += 'equally high' in res.reason
        cell.release(pid)
        _move(cell, pid, (3.0 + k, 3.0, 0.5))
    cell.close()
    assert ties >= 1


def _lid(x: float, y: float, top: float) -> Detection:
    return Detection(x, y, top, 0.0, 0.4, 0.3, 0.2, 1.0, 0.1, 1.0, 1.0)


def test_truck_tie_too_close_to_call_is_ambiguous():
    band, near = 0.03, (0.60, -0.72)
    # A second top just inside the band's edge: it might be in the band or not.
    lids = [_lid(-0.4, -1.0, 0.60), _lid(-0.05, -0.9, 0.60 - band + 0.0015)]
    res = _truck_choice(tuple(lids), lids, PARAMS, band, near)
    assert res.chosen is None and res.ambiguous and 'tie band' in res.reason
    # Farther inside than tie_margin (2 mm, against a measured 1.31 mm at worst): in the band,
    # and the nearer, so chosen.
    lids = [_lid(-0.4, -1.0, 0.60), _lid(-0.05, -0.9, 0.60 - band + 0.0025)]
    res = _truck_choice(tuple(lids), lids, PARAMS, band, near)
    assert res.chosen is lids[1] and not res.ambiguous
    # Two equally high lids equally far from the robot (mirrored about the line to it).
    lids = [_lid(-0.2, -0.60, 0.60), _lid(-0.2, -0.84, 0.601)]
    res = _truck_choice(tuple(lids), lids, PARAMS, band, near)
    assert res.chosen is None and res.ambiguous and 'equally near' in res.reason
    # Clearly apart: the nearer one.
    lids = [_lid(-0.4, -1.0, 0.60), _lid(-0.05, -0.9, 0.59)]
    res = _truck_choice(tuple(lids), lids, PARAMS, band, near)
    assert res.chosen is lids[1] and not res.ambiguous
    # A top just inside the band's edge that is farther from the robot than the highest: in
    # the tie or not, the highest is nearer, so it is chosen either way.
    for dz in (-0.0015, 0.0015):
        lids = [_lid(-0.05, -0.9, 0.60), _lid(-0.4, -1.0, 0.60 - band + dz)]
        res = _truck_choice(tuple(lids), lids, PARAMS, band, near)
        assert res.chosen is lids[0] and not res.ambiguous


def test_held_truck_carton_height_within_5_mm():
    from palletizer.core.motion import MotionParams, MotionPlanner
    from palletizer.execution import PickPlaceSequencer, static_boxes
    from palletizer.wiring.arm import CellArm

    cell = _cell(32, 2)
    pid = cell.present().package_id
    t = cell.ground_truth().cartons[pid]
    obs = Observation(pid, tuple(float(v) for v in t.pos), yaw_of_quat(t.quat), tuple(t.dims), 1.0)
    seq = PickPlaceSequencer(
        CellArm(cell, speed=0.0),
        planner=MotionPlanner(params=MotionParams.from_config(CFG.cell)),
        static_boxes=static_boxes(CFG, 'truck'),
        use_wrench=False,
    )
    assert seq.pick(obs).outcome.name == 'OK'
    w, h = CFG.cell.cameras['truck_side'].size
    f = cell.capture(PARAMS.held_cameras, int(w), int(h), rgb=False)
    views = [
        CameraView(n, v.depth, None, v.intrinsics.K, v.T_world_optical, v.time)
        for n, v in f.items()
    ]
    g = CFG.cell.gripper
    got = held_height(
        views,
        PARAMS,
        RobotBody.from_config(CFG.cell),
        cell.q.copy(),
        obs,
        g.tcp_offset,
        g.cup_gap,
    )
    cell.close()
    assert got.confidence >= 0.5, got
    # The bottom edge, not a low percentile of the side: within 2.5 mm, and never more than
    # 1 mm short (a short read presses the carton into its support at the place).
    assert -0.001 < got.height - t.dims[2] < 0.0025, (got, t.dims)


def test_detection_errors_take_yaw_modulo_a_half_turn():
    det = Detection(0.0, 0.0, 0.5, math.pi / 2, 0.4, 0.3, 0.2, 1.0, 0.1, 1.0, 1.0)
    e = detection_errors(det, (0.001, 0.0, 0.4), -math.pi / 2 + 0.01, (0.4, 0.3, 0.2))
    assert e['pos_mm'] == pytest.approx(1.0)
    assert e['yaw_deg'] == pytest.approx(math.degrees(0.01))
    assert e['dims_mm'] == pytest.approx(0.0, abs=1e-9)


def test_unknown_detector_key_is_named():
    with pytest.raises(DetectionError, match=r'detector.min_conf: unknown key.*min_confidence'):
        DetectorParams.from_config({'min_conf': 0.5})


def test_a_stray_point_above_an_air_gap_is_not_the_held_carton():
    # The carton's side from 10 to 30 cm under the lid, 1 mm apart, and the floor far below.
    side = -np.arange(0.10, 0.30, 0.001)
    floor = np.full(50, -1.0)
    assert held_segment(np.concatenate([side, floor]), 0.03).size == side.size
    # One flying pixel just under the lid, 5 cm above the side: dropped, not the carton.
    got = held_segment(np.concatenate([[-0.05], side, floor]), 0.03)
    assert got.size == side.size and got[0] == pytest.approx(-0.10)
    # Four points are more than a stray: they end the segment (the measure then refuses).
    got = held_segment(np.concatenate([[-0.050, -0.051, -0.052, -0.053], side, floor]), 0.03)
    assert got.size == 4


def test_stray_returns_in_the_air_under_a_held_carton_do_not_join_the_column_below():
    # The carton's side, 0.25 m of it at 0.1 mm spacing (2,500 points), a few stray returns
    # every 1-2 cm through the 0.16 m of air below it, then the top of the column below.
    side = -np.arange(0.0, 0.25, 0.0001)
    air = -np.array([0.262, 0.275, 0.29, 0.301, 0.318, 0.33, 0.345, 0.36, 0.375, 0.392])
    column = -np.arange(0.41, 0.43, 0.0001)
    z = np.concatenate([side, air, column])
    # An empty-band rule runs on through the strays to the column below (level 33 seed 8).
    assert held_segment(z, 0.03).size == z.size
    got = held_segment(z, 0.03, sparse=0.01)
    assert got.size == side.size and got[-1] == pytest.approx(side[-1])
    # A carton's side seen sparsely (1 point every 5 mm) is not cut by the same rule.
    assert held_segment(-np.arange(0.0, 0.3, 0.005), 0.03, sparse=0.01).size == 60


def test_the_held_bottom_is_the_edge_of_the_side_not_a_low_percentile():
    # A 0.25 m side seen at 0.05 mm spacing (5,000 points) with its bottom at z = 0, and three
    # stray returns in the air under it.
    side = np.arange(0.0, 0.25, 0.00005)
    strays = np.array([-0.004, -0.011, -0.019])
    z = np.concatenate([side, strays])
    assert held_bottom(z, 0.0025, 0.25) == pytest.approx(0.0, abs=1e-9)
    # The 1 % percentile stands 2.5 mm above the edge: a carton read that much short.
    assert np.percentile(z, 1.0) > 0.002
    # A side seen sparsely near its bottom (1 point per mm over its lowest 2 cm, 20 per mm
    # above): the bottom is where the points thin out to below a quarter of the average band.
    sparse_low = np.concatenate([np.arange(0.0, 0.02, 0.001), np.arange(0.02, 0.25, 0.00005)])
    got = held_bottom(sparse_low, 0.0025, 0.25)
    assert 0.015 < got <= 0.02
    with pytest.raises(DetectionError, match='no points'):
        held_bottom(np.zeros(0), 0.0025, 0.25)


def _column_view(below_depth: float) -> tuple[CameraView, tuple]:
    # One image column: the carton's face at 1.05 m in rows 0-49 (z from 0.80 down to 0.75 m),
    # then whatever lies below it in the image at `below_depth`.
    depth = np.zeros((80, 3), dtype=np.float32)
    depth[:50, 1] = 1.05
    depth[50:, 1] = below_depth
    view = CameraView('side', depth, None, np.eye(3), np.eye(4))
    rows = np.arange(50)
    z = 0.80 - rows * 0.001
    return view, (0, z, rows, np.ones(50, dtype=int))


def test_a_bottom_edge_in_front_of_which_something_nearer_stands_is_hidden():
    from palletizer.core.detection.held import _bottom_hidden

    view, pix = _column_view(0.99)  # a set-aside carton's lid, nearer the camera
    assert _bottom_hidden([view], [pix], 0.751, 0.0025)
    view, pix = _column_view(1.40)  # the floor beyond the carton: a true edge
    assert not _bottom_hidden([view], [pix], 0.751, 0.0025)
    view, pix = _column_view(0.0)  # no return below
    assert not _bottom_hidden([view], [pix], 0.751, 0.0025)


def test_a_hidden_bottom_takes_the_lid_above_the_floor_only_when_it_is_near(monkeypatch):
    from palletizer.core.detection import held as held_mod
    from palletizer.core.detection.held import HeldMeasure

    seen = HeldMeasure(0.186, 1.0, 'ok', 0.75, 5000, hidden=True)
    monkeypatch.setattr(held_mod, 'measure_held_height', lambda *a, **k: seen)
    body = RobotBody.from_config(CFG.cell)
    g = CFG.cell.gripper
    # The observed lid at 0.224 m; the detection's own height (0.183) is not a bound.
    obs = Observation('c', (0.0, -0.6, 0.1325), 0.0, (0.34, 0.33, 0.183), 1.0)

    def measure(floor: float | None) -> HeldMeasure:
        return held_height([], PARAMS, body, np.zeros(6), obs, g.tcp_offset, g.cup_gap, floor)

    near = measure(0.02)  # the lid 204 mm above the floor: 18 mm over what is seen
    assert near.height == pytest.approx(0.204) and near.hidden and 'hidden' in near.reason
    far = measure(-0.04)  # 264 mm: more than held_hidden_max (30 mm) over what is seen
    assert far.height == 0.0 and 'at least 186 mm' in far.reason and '264 mm' in far.reason
    assert measure(0.05).height == 0.0  # the lid 174 mm up: below what is seen, refused
    assert measure(None).height == 0.0  # no floor, no upper bound
    # A bottom that is not hidden is measured, whatever the floor.
    monkeypatch.setattr(
        held_mod, 'measure_held_height', lambda *a, **k: HeldMeasure(0.2, 1.0, 'ok', 0.7, 5000)
    )
    assert measure(-0.04).height == pytest.approx(0.2)
