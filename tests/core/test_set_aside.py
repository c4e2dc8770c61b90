"""core.detection.measure_lid: the lid of a carton set aside on the auxiliary table, seen by the
cameras above it, with the depth sensor model of configs/cell.yaml."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.core.contracts import Observation, PackageSpec
from palletizer.core.detection import measure_lid, remeasured
from palletizer.core.heightmap_fusion import RobotBody
from palletizer.core.planning.buffer import BufferTable
from palletizer.core.views import CameraView
from palletizer.sim.cell import Cell, CellOptions
from palletizer.sim.scene import CartonPlacement

from tests.sim._cellkit import Draw

CFG = load_config()
PARAMS = CFG.perception.detector
DIMS = (0.24, 0.18, 0.10)  # book_s


def _set_aside(dims=DIMS):
    """A cell with one carton standing in the buffer's first slot, and that slot."""
    table = BufferTable.from_config(CFG.cell, CFG.planner.buffer, None)
    spec = PackageSpec('book_s-00', 'book_s', dims, 1.2, (0.0, 0.0, 0.0))
    slot = table.pose_for(spec, (), 0)
    assert slot is not None
    draw = Draw(0, 'book_s-00', dims, 1.2, (0.0, 0.0, 0.0))
    x, y, z = slot.position
    q = (np.cos(slot.yaw / 2), 0.0, 0.0, np.sin(slot.yaw / 2))
    cell = Cell(
        cartons=[CartonPlacement(draw, (x, y, z + 0.0005), q)],
        options=CellOptions.from_config(CFG.cell),
        seed=4,
    )
    cell.settle(0.3)
    return cell, slot


def _views(cell: Cell) -> list[CameraView]:
    out = []
    for name in PARAMS.lid_cameras:
        w, h = CFG.cell.cameras[name].size
        f = cell.capture([name], w, h, rgb=False)[name]
        out.append(CameraView(name, f.depth, None, f.intrinsics.K, f.T_world_optical, f.time))
    return out


@pytest.mark.sim
@pytest.mark.parametrize('believed_error', [0.0035, 0.022, -0.004, -0.025])
def test_a_set_aside_lid_is_measured_within_a_millimetre_whatever_height_was_believed(
    believed_error,
):
    cell, slot = _set_aside()
    true_lid = float(cell.ground_truth().cartons['book_s-00'].lid[2])
    H = DIMS[2] + believed_error  # the in-hand measurement's error
    x, y, _ = slot.position
    believed = Observation(
        'book_s-00',
        (x, y, slot.position[2] - DIMS[2] / 2 + H / 2),
        slot.yaw,
        (DIMS[0], DIMS[1], H),
        1.0,
    )
    got = measure_lid(_views(cell), PARAMS, believed, RobotBody.from_config(CFG.cell), cell.q)
    assert got.reason == 'ok' and got.points >= 1000 and got.confidence == 1.0
    assert abs(got.top_z - true_lid) < 0.001
    fixed = remeasured(believed, got.top_z)
    assert abs(fixed.dims_guess[2] - DIMS[2]) < 0.001  # from the table's top
    assert abs(fixed.position[2] + fixed.dims_guess[2] / 2 - true_lid) < 0.001
    assert fixed.position[:2] == believed.position[:2] and fixed.yaw == believed.yaw
    cell.close()


@pytest.mark.sim
def test_no_lid_where_nothing_stands_says_how_many_points_it_saw():
    cell, slot = _set_aside()
    x, y, z = slot.position
    elsewhere = Observation('book_s-00', (x - 0.0, y + 0.30, z), slot.yaw, DIMS, 1.0)
    got = measure_lid(_views(cell), PARAMS, elsewhere)
    assert got.top_z == 0.0 and got.confidence == 0.0
    assert got.reason.startswith(f'{got.points} lid points seen at z 0.610..0.730 m')
    assert got.reason.endswith('over the footprint; expected 50')
    cell.close()
