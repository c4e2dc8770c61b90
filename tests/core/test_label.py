"""The held carton's label read from the label cameras (core/detection/label.py): the side it is
on, told from the rendered label patch, whichever way round the carton came."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from palletizer.core.compliance import label_normal
from palletizer.core.config import load_config
from palletizer.core.contracts import Observation
from palletizer.core.detection.label import detect_label, face_normal, opposite
from palletizer.core.views import CameraView
from palletizer.sim.cell import Cell, CellOptions

CFG = load_config()
PARAMS = CFG.perception.detector
LIFT = (-0.20, -0.80, 0.85)  # the carton's centre held at the station's lift (probed, level 18)


@pytest.fixture(scope='module')
def cell():
    c = Cell(CFG.level(18), 1, options=CellOptions.from_config(CFG.cell))
    yield c
    c.close()


def _hold(cell: Cell, package_id: str, yaw: float) -> Observation:
    """The carton floating at the lift pose turned by `yaw`, and its observation as the station
    detection would give it: the footprint along the yaw taken modulo a half turn."""
    truth = cell.ground_truth().cartons
    for other in truth.values():  # one carton in the air at a time
        if other.package_id != package_id and np.linalg.norm(other.pos - LIFT) < 0.5:
            _put(cell, other.index, (3.0, 3.0 + other.index, 0.5), 0.0)
    _put(cell, truth[package_id].index, LIFT, yaw)
    t = truth[package_id]
    seen_yaw = math.remainder(yaw, math.pi)  # a box reads the same turned half round
    return Observation(package_id, LIFT, seen_yaw, t.dims, 1.0)


def _put(cell: Cell, index: int, xyz, yaw: float) -> None:
    m, d = cell.model, cell.data
    a = m.jnt_qposadr[m.body(f'package_{index}').jntadr[0]]
    d.qpos[a : a + 3] = xyz
    d.qpos[a + 3 : a + 7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
    mujoco.mj_forward(m, d)


def _views(cell: Cell) -> list[CameraView]:
    w, h = CFG.cell.cameras['label_a'].size
    f = cell.capture(PARAMS.label_cameras, int(w), int(h), rgb=True)
    return [CameraView(n, v.depth, v.rgb, v.intrinsics.K, v.T_world_optical) for n, v in f.items()]


def _read(cell: Cell, obs: Observation, kind: str):
    top = LIFT[2] + obs.dims_guess[2] / 2
    return detect_label(_views(cell), obs, top, kind, CFG.catalogue.label_size_m, PARAMS)


@pytest.mark.parametrize('package_id', ['std_m-00', 'apparel-01'])
@pytest.mark.parametrize('yaw_deg', [0.0, 10.0, 180.0, -170.0, 90.0, -95.0])
def test_the_label_side_is_read_whichever_way_the_carton_came(cell, package_id, yaw_deg):
    yaw = math.radians(yaw_deg)
    obs = _hold(cell, package_id, yaw)
    face = CFG.catalogue.rules(package_id.rsplit('-', 1)[0]).label
    got = _read(cell, obs, face[1])
    assert got.face, got
    truth = label_normal(face, yaw)
    n = face_normal(got.face, obs.yaw)
    assert n[0] * truth[0] + n[1] * truth[1] > 0.99, (got, truth)


def test_a_half_turn_moves_the_label_to_the_opposite_face_of_the_same_observation(cell):
    # The observation is the same either way round (a box's footprint and yaw modulo a half
    # turn): only the cameras can tell the two apart.
    a = _hold(cell, 'std_m-00', 0.1)
    first = _read(cell, a, 'y')
    b = _hold(cell, 'std_m-00', 0.1 + math.pi)
    second = _read(cell, b, 'y')
    assert a.yaw == pytest.approx(b.yaw)
    assert first.how == second.how == 'seen'
    assert second.face == opposite(first.face)


def test_a_carton_without_its_label_is_not_read_as_labelled(cell):
    m = cell.model
    i = cell.ground_truth().cartons['std_m-00'].index
    g = m.geom(f'package_geom_{i}_label').id
    before = m.geom_rgba[g].copy()
    m.geom_rgba[g] = m.geom_rgba[m.geom(f'package_geom_{i}').id]  # the patch painted as board
    try:
        obs = _hold(cell, 'std_m-00', 0.0)
        got = _read(cell, obs, '')
        assert got.face == '' and 'no label seen' in got.reason, got
        assert got.shares and max(got.shares.values()) < PARAMS.label_clear
    finally:
        m.geom_rgba[g] = before


def test_the_label_patch_is_seen_but_not_touched(cell):
    m = cell.model
    i = cell.ground_truth().cartons['std_m-00'].index
    g = m.geom(f'package_geom_{i}_label')
    assert g.contype[0] == 0 and g.conaffinity[0] == 0
    body = m.body(f'package_{i}')
    assert body.mass[0] == pytest.approx(4.2)  # the patch adds no mass
    assert np.allclose(g.size, [0.148 / 2, 0.0004, 0.105 / 2])  # A6 on the long side
