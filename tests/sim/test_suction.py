"""Suction: sealing, carrying without slip, clean release, and honest seal failures."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from palletizer.sim.cell import Cell
from palletizer.sim.scene import CartonPlacement
from palletizer.sim.suction import SealStatus

from tests.sim._cellkit import Draw, cartesian_move, ik_tool_down, joint_move

pytestmark = pytest.mark.sim

DECK = 0.144
SPOT = (0.6, -0.1)


def _cell_with(draw: Draw) -> Cell:
    pos = (SPOT[0], SPOT[1], DECK + draw.dims[2] / 2 + 0.0005)
    cell = Cell(cartons=[CartonPlacement(draw, pos)])
    cell.settle(0.2)
    return cell


def _approach(cell: Cell, pid: str, offset=(0.0, 0.0), gap: float = 0.0015) -> np.ndarray:
    """Bring the cup faces `gap` above the lid centre shifted by `offset` [m]; return the grasp."""
    lid = cell.ground_truth().cartons[pid].lid
    grasp = lid + np.array([offset[0], offset[1], gap])
    above = grasp + [0, 0, 0.15]
    cell.track(joint_move(cell.q, ik_tool_down(above, cell.q)))
    cell.track(cartesian_move(cell.q, above, grasp, 2.0, 0.3))
    cell.settle(0.1)
    return grasp


def _relative(cell: Cell, index: int) -> np.ndarray:
    m, d = cell.model, cell.data
    mujoco.mj_kinematics(m, d)
    g, b = m.body('gripper').id, m.body(f'package_{index}').id
    return d.xmat[g].reshape(3, 3).T @ (d.xpos[b] - d.xpos[g])


def _carry(cell: Cell, grasp: np.ndarray, index: int) -> float:
    """Lift at 1 g, move 0.85 m and back at 2 m/s^2; return the max slip [m] vs the seal pose."""
    r0 = _relative(cell, index)
    slip = [0.0]
    step = cell.step

    def watched(n: int = 1) -> None:
        for _ in range(n):
            step(1)
            slip[0] = max(slip[0], float(np.linalg.norm(_relative(cell, index) - r0)))

    up = grasp + [0, 0, 0.3]
    far = up + [-0.8, 0.3, 0.0]
    for a, b, acc, v in ((grasp, up, 9.81, 1.0), (up, far, 2.0, 1.5), (far, up, 2.0, 1.5)):
        cell.servo.track(cartesian_move(cell.q, a, b, acc, v), watched)
    return slip[0]


def test_five_kilo_carton_is_carried_at_2_m_s2_without_slip_and_released_cleanly():
    draw = Draw(0, 'apparel-00', (0.45, 0.32, 0.20), 5.0, (0.03, -0.02, 0.0))
    cell = _cell_with(draw)
    grasp = _approach(cell, 'apparel-00')
    res = cell.set_vacuum(True)
    assert res.status is SealStatus.SEALED
    assert res.n_cups == 16
    assert res.capacity_ratio == pytest.approx(560.0 / (5.0 * 9.81 * 1.5))
    slip = _carry(cell, grasp, 0)
    assert slip < 1e-3  # measured 0.057 mm
    # Put it back, release, lift away: the carton stays where it was put.
    cell.track(cartesian_move(cell.q, cell.tcp_pose()[0], grasp + [0, 0, 0.002], 2.0, 0.5))
    cell.settle(0.2)
    assert cell.set_vacuum(False).status is SealStatus.RELEASED
    assert cell.suction.held is None
    cell.settle(0.3)  # released 2 mm above the deck: let it land
    placed = cell.ground_truth().cartons['apparel-00'].pos
    cell.track(cartesian_move(cell.q, cell.tcp_pose()[0], grasp + [0, 0, 0.3], 2.0, 0.5))
    cell.settle(0.5)
    gt = cell.ground_truth()
    np.testing.assert_allclose(gt.cartons['apparel-00'].pos, placed, atol=1e-3)
    np.testing.assert_allclose(gt.cartons['apparel-00'].pos[:2], SPOT, atol=2e-3)
    assert gt.tcp_pos[2] - gt.cartons['apparel-00'].lid[2] > 0.25
    assert gt.held is None


def test_heaviest_carton_is_carried():
    draw = Draw(0, 'heavy_l-00', (0.55, 0.36, 0.26), 8.5, (-0.06, 0.035, -0.035))
    cell = _cell_with(draw)
    grasp = _approach(cell, 'heavy_l-00')
    assert cell.set_vacuum(True).sealed
    slip = _carry(cell, grasp, 0)
    assert slip < 1e-3  # measured 0.071 mm
    assert cell.ground_truth().held == 'heavy_l-00'


def test_lid_too_small_for_any_cup_fails_to_seal():
    # 30 mm wide: no 40 mm cup disc fits on it, wherever the tool stands.
    cell = _cell_with(Draw(0, 'stick-00', (0.30, 0.03, 0.15), 0.5))
    _approach(cell, 'stick-00')
    res = cell.set_vacuum(True)
    assert res.status is SealStatus.NO_COVER
    assert cell.suction.held is None
    assert not cell.data.eq_active[cell.model.eq('suction_0').id]


def test_tool_hanging_off_the_lid_corner_fails_on_capacity_for_a_heavy_carton():
    # Tool shifted to the lid corner: only one row of three cups stays fully on the lid,
    # 3 x 35 N = 105 N against 8.5 kg x g x 1.5 = 125 N.
    draw = Draw(0, 'heavy_l-00', (0.55, 0.36, 0.26), 8.5)
    cell = _cell_with(draw)
    _approach(cell, 'heavy_l-00', offset=(0.20, 0.21))
    res = cell.set_vacuum(True)
    assert res.status is SealStatus.CAPACITY, res
    assert res.n_cups == 3
    assert res.capacity_n == pytest.approx(105.0)
    assert cell.suction.held is None


def test_tool_partly_off_the_lid_still_seals_a_light_carton_on_the_covered_cups():
    draw = Draw(0, 'std_s-00', (0.55, 0.36, 0.26), 3.5)
    cell = _cell_with(draw)
    _approach(cell, 'std_s-00', offset=(0.20, 0.21))
    res = cell.set_vacuum(True)
    assert res.sealed
    assert res.n_cups == 3


def test_lid_beyond_the_gap_band_fails_to_seal():
    cell = _cell_with(Draw(0, 'std_m-00', (0.42, 0.30, 0.18), 4.2))
    _approach(cell, 'std_m-00', gap=0.008)  # 8 mm: above the 4 mm band
    assert cell.set_vacuum(True).status is SealStatus.NO_CARTON
    assert cell.suction.held is None
