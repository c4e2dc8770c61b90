"""Height-map maths on carton poses: quaternion yaw and footprints stamped on the pallet grid."""

from __future__ import annotations

import math

import numpy as np
from palletizer.core.contracts import PalletGeometry
from palletizer.core.fusion import stamp_heightmap, yaw_of_quat


def _quat_z(yaw: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def test_yaw_of_quat_reads_the_heading_of_a_rotation_about_z():
    for yaw in (0.0, 0.3, -1.2, math.pi / 2, 3.0):
        assert math.isclose(yaw_of_quat(_quat_z(yaw)), yaw, abs_tol=1e-12)


def test_stamp_heightmap_stamps_a_rotated_top_and_skips_held_and_floating_cartons():
    p = PalletGeometry()
    ox, oy = p.origin_xy
    x, y = ox + 0.40, oy + 0.40
    h = 0.20
    boxes = [
        ('a-01', (x, y, p.deck_z + h / 2), _quat_z(math.pi / 2), (0.30, 0.10, h)),
        ('b-01', (x + 0.3, y, p.deck_z + 0.5), _quat_z(0.0), (0.10, 0.10, 0.10)),  # floating
        ('c-01', (x - 0.3, y, p.deck_z + 0.05), _quat_z(0.0), (0.10, 0.10, 0.10)),  # held
    ]
    hm = stamp_heightmap(boxes, 'c-01', p)
    np.testing.assert_allclose(hm.top, h)
    ix, iy = int(0.40 / hm.cell_size), int(0.40 / hm.cell_size)
    # Turned a quarter: 0.10 m along x, 0.30 m along y.
    np.testing.assert_allclose(hm.cells[[iy, iy + 12], ix], h)
    assert hm.cells[iy, ix + 8] == 0.0 and hm.cells[iy + 18, ix] == 0.0
    assert np.count_nonzero(hm.cells) == 10 * 30
