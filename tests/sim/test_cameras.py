"""Cameras: planar depth in metres, pinhole intrinsics from fovy, poses, renderer reuse."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.sim.cameras import CAMERAS, CameraError, look_at_quat
from palletizer.sim.cell import Cell
from palletizer.sim.scene import CartonPlacement

from tests.sim._cellkit import Draw

pytestmark = pytest.mark.sim

DECK = 0.144


def _unproject(frame, u: int, v: int) -> np.ndarray:
    K, z = frame.intrinsics, float(frame.depth[v, u])
    p = np.array([(u - K.cx) / K.fx * z, (v - K.cy) / K.fy * z, z])
    return frame.T_world_optical[:3, :3] @ p + frame.T_world_optical[:3, 3]


@pytest.fixture(scope='module')
def cell():
    box = Draw(0, 'std_m-00', (0.42, 0.30, 0.18), 4.2)
    c = Cell(cartons=[CartonPlacement(box, (0.6, 0.0, DECK + 0.09 + 0.0005))])
    c.settle(0.2)
    yield c
    c.close()


def test_depth_is_planar_z_and_unprojects_onto_the_lid(cell):
    frames = cell.capture(['top', 'diag_a', 'diag_b'], 320, 240)
    lid_z = cell.ground_truth().cartons['std_m-00'].lid[2]
    top = frames['top']
    assert top.depth.dtype == np.float32 and top.depth.shape == (240, 320)
    assert top.rgb.dtype == np.uint8 and top.rgb.shape == (240, 320, 3)
    # Image corners of the top camera see the floor, the centre sees the lid: planar Z is
    # the same along any ray to a horizontal plane at one height.
    np.testing.assert_allclose(_unproject(top, 160, 120)[2], lid_z, atol=2e-3)
    np.testing.assert_allclose(_unproject(top, 5, 5)[2], 0.0, atol=2e-3)
    for name in ('diag_a', 'diag_b'):
        f = frames[name]
        # The diagonals look at the pallet centre; the ray through the principal point hits the lid.
        np.testing.assert_allclose(_unproject(f, 160, 120)[2], lid_z, atol=5e-3)


def test_intrinsics_follow_fovy(cell):
    K = cell.capture(['top'], 640, 480, rgb=False)['top'].intrinsics
    assert K.fy == pytest.approx(480 / (2 * np.tan(np.deg2rad(45) / 2)))
    assert K.fx == K.fy
    assert (K.cx, K.cy) == (319.5, 239.5)


def test_top_camera_image_up_is_world_plus_y(cell):
    pose = cell.capture(['top'], 64, 48, rgb=False, depth=True)['top'].T_world_optical
    np.testing.assert_allclose(pose[:3, 1], [0.0, -1.0, 0.0], atol=1e-9)  # image down = -Y
    np.testing.assert_allclose(pose[:3, 2], [0.0, 0.0, -1.0], atol=1e-9)  # looking down
    np.testing.assert_allclose(pose[:3, 3], [0.6, 0.0, 2.4])


def test_station_camera_sees_the_pick_station():
    spec = next(s for s in CAMERAS if s.name == 'station')
    q = look_at_quat(spec)
    w, x, y, z = q
    R = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    view = np.subtract(spec.look_at, spec.pos)
    np.testing.assert_allclose(-R[:, 2], view / np.linalg.norm(view), atol=1e-9)


def test_unknown_camera_is_named_with_a_suggestion(cell):
    with pytest.raises(CameraError, match=r"camera 'diag_c' does not exist.*did you mean"):
        cell.capture(['diag_c'])


def test_one_renderer_per_resolution_is_reused(cell):
    cell.capture(['top'], 64, 48)
    cell.capture(['station'], 64, 48)
    cell.capture(['top'], 32, 24)
    assert set(cell._rig._renderers) >= {(64, 48), (32, 24)}
    n = len(cell._rig._renderers)
    cell.capture(['diag_b'], 64, 48)
    assert len(cell._rig._renderers) == n


def test_capturing_does_not_change_the_physics():
    digests = []
    for capture in (False, True):
        box = Draw(0, 'std_m-00', (0.42, 0.30, 0.18), 4.2)
        c = Cell(cartons=[CartonPlacement(box, (0.6, 0.0, DECK + 0.3))])  # falling
        c.step(50)
        if capture:
            c.capture(['top', 'station'], 64, 48)
        c.step(200)
        digests.append(c.state_digest())
        c.close()
    assert digests[0] == digests[1]
