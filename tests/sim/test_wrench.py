"""Wrist F/T: one plumb reading weighs a sealed carton; the noise model behaves as configured."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from palletizer.sim.cell import Cell, CellOptions
from palletizer.sim.scene import CartonPlacement
from palletizer.sim.wrench import Wrench, WrenchNoise, plumb_weigh

from tests.sim._cellkit import Draw, cartesian_move, ik_tool_down, joint_move

pytestmark = pytest.mark.sim


def _weigh(draw: Draw, offset=(0.0, 0.0)):
    cell = Cell(
        cartons=[CartonPlacement(draw, (0.6, -0.1, 0.144 + draw.dims[2] / 2 + 0.0005))],
    )
    cell.settle(0.2)
    lid = cell.ground_truth().cartons[draw.package_id].lid
    grasp = lid + [offset[0], offset[1], 0.0015]
    up = grasp + [0, 0, 0.3]
    cell.track(joint_move(cell.q, ik_tool_down(up, cell.q)))
    cell.settle(0.5)
    tare = cell.wrench()
    cell.track(cartesian_move(cell.q, up, grasp, 2.0, 0.3))
    cell.settle(0.1)
    assert cell.set_vacuum(True).sealed
    cell.track(cartesian_move(cell.q, grasp, up, 2.0, 0.5))
    cell.settle(0.5)
    reading = cell.wrench()
    m, d = cell.model, cell.data
    mujoco.mj_kinematics(m, d)
    g, b = m.body('gripper').id, m.body(f'package_{draw.index}').id
    com = d.xmat[g].reshape(3, 3).T @ (d.xipos[b] - d.xpos[g])
    return tare, reading, com


@pytest.mark.parametrize(
    ('mass', 'cog', 'offset'),
    [(5.0, (0.03, -0.02, -0.01), (0.0, 0.0)), (8.5, (-0.06, 0.035, -0.035), (0.04, -0.03))],
)
def test_one_plumb_reading_gives_mass_within_a_gram_and_com_within_half_a_millimetre(
    mass, cog, offset
):
    draw = Draw(0, 'box-00', (0.55, 0.36, 0.26), mass, cog)
    tare, reading, com = _weigh(draw, offset)
    est_mass, est_xy = plumb_weigh(tare, reading)
    assert abs(est_mass - mass) < 1e-3
    np.testing.assert_allclose(est_xy, com[:2], atol=5e-4)
    # The offset pick and the CoG offset really move the CoM off the flange axis.
    assert np.linalg.norm(com[:2]) > 0.03


def test_tare_of_the_empty_gripper_reads_its_own_weight():
    draw = Draw(0, 'box-00', (0.42, 0.30, 0.18), 4.2)
    tare, _, _ = _weigh(draw)
    np.testing.assert_allclose(tare.force, [0.0, 0.0, -2.55 * 9.81], atol=1e-6)


def test_noise_and_bias_follow_the_configured_model():
    noise = WrenchNoise(force_sigma=5.0, torque_sigma=0.2, force_bias=(1.0, -2.0, 3.0))
    cell = Cell(options=CellOptions(wrench_noise=noise))
    cell.settle(0.2)
    samples = []
    for _ in range(4000):
        cell.step(1)
        samples.append(cell.wrench())
    f = np.array([s.force for s in samples])
    t = np.array([s.torque for s in samples])
    truth = Wrench(np.array([0.0, 0.0, -2.55 * 9.81]), np.zeros(3))
    np.testing.assert_allclose(f.mean(axis=0) - truth.force, [1.0, -2.0, 3.0], atol=0.3)
    np.testing.assert_allclose(f.std(axis=0), 5.0, rtol=0.05)
    np.testing.assert_allclose(t.std(axis=0), 0.2, rtol=0.05)


def test_a_sample_depends_on_the_instant_not_on_how_often_it_was_read():
    noise = WrenchNoise(force_sigma=5.0, torque_sigma=0.2)
    a, b = (Cell(options=CellOptions(wrench_noise=noise)) for _ in range(2))
    for _ in range(7):
        a.wrench()  # extra reads on one cell only
    a.step(10)
    b.step(10)
    np.testing.assert_array_equal(a.wrench().force, b.wrench().force)
    a.step(1)
    assert not np.array_equal(a.wrench().force, b.wrench().force)


def test_zero_ftsensor_removes_the_load_and_the_error_of_that_instant():
    """As the UR controller's zero_ftsensor: the empty tool's weight and the sensor's bias read
    zero afterwards, while the noise stays."""
    noise = WrenchNoise(force_sigma=1.0, torque_sigma=0.05, force_bias=(1.0, -2.0, 3.0))
    cell = Cell(options=CellOptions(wrench_noise=noise))
    cell.settle(0.2)
    before = cell.wrench().force
    assert abs(before[2] - (-2.55 * 9.81 + 3.0)) < 5.0
    cell.zero_wrench()
    samples = []
    for _ in range(2000):
        cell.step(1)
        samples.append(cell.wrench())
    f = np.array([s.force for s in samples])
    np.testing.assert_allclose(f.mean(axis=0), 0.0, atol=0.1)
    np.testing.assert_allclose(f.std(axis=0), 1.0, rtol=0.1)
