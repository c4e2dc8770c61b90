"""The Cell facade: lockstep stepping, fast-forward, determinism, ground truth."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.sim.cell import Cell, CellError, CellOptions
from palletizer.sim.scene import CartonPlacement, SceneOptions
from palletizer.sim.servo import Trajectory
from palletizer.sim.sources.base import StepWorld
from palletizer.sim.stability import StabilityProtocol

from tests.sim._cellkit import Draw, cartesian_move, ik_tool_down, joint_move

pytestmark = pytest.mark.sim

DECK = 0.144


def _two_cartons() -> list[CartonPlacement]:
    a = Draw(0, 'std_m-00', (0.42, 0.30, 0.18), 4.2, (0.05, 0.0, 0.01))
    b = Draw(1, 'small-01', (0.30, 0.22, 0.12), 1.8, (0.025, 0.0, 0.0))
    return [
        CartonPlacement(a, (0.6, -0.1, DECK + 0.09 + 0.0005)),
        CartonPlacement(b, (0.9, 0.2, DECK + 0.06 + 0.0005)),
    ]


def _point(q: np.ndarray) -> Trajectory:
    return Trajectory(np.zeros(1), q[None], np.zeros((1, 6)), np.zeros((1, 6)))


def _episode(cell: Cell) -> None:
    """Pick carton 0, carry it onto carton 1 and release it there, then settle."""
    cell.settle(0.2)
    lid = cell.ground_truth().cartons['std_m-00'].lid
    above = lid + [0, 0, 0.2]
    cell.track(joint_move(cell.q, ik_tool_down(above, cell.q)))
    cell.track(cartesian_move(cell.q, above, lid + [0, 0, 0.0015], 2.0, 0.3))
    cell.set_vacuum(True)
    target = cell.ground_truth().cartons['small-01'].lid + [0, 0, 0.18 + 0.002]
    cell.track(cartesian_move(cell.q, lid + [0, 0, 0.0015], above, 2.0, 0.5))
    cell.track(cartesian_move(cell.q, above, target + [0, 0, 0.2], 2.0, 1.0))
    cell.track(cartesian_move(cell.q, target + [0, 0, 0.2], target, 2.0, 0.3))
    cell.set_vacuum(False)
    cell.settle(1.25)


def test_cell_is_a_step_world_and_time_advances_only_when_asked():
    cell = Cell(cartons=_two_cartons())
    assert isinstance(cell, StepWorld)
    t0 = cell.time
    cell.ground_truth()
    cell.wrench()
    assert cell.time == t0
    cell.step(10)
    assert cell.time == pytest.approx(t0 + 10 * cell.dt)
    cell.settle(0.5)
    assert cell.time == pytest.approx(t0 + 10 * cell.dt + 0.5)


def test_same_seed_and_calls_give_identical_states():
    digests = []
    for _ in range(2):
        cell = Cell(cartons=_two_cartons(), seed=3)
        _episode(cell)
        digests.append(cell.state_digest())
    assert digests[0] == digests[1]
    # Control: a different history really changes the digest.
    cell = Cell(cartons=_two_cartons(), seed=3)
    cell.settle(0.002)
    _episode(cell)
    assert cell.state_digest() != digests[0]


def test_carried_carton_lands_on_the_target_carton():
    cell = Cell(cartons=_two_cartons())
    _episode(cell)
    gt = cell.ground_truth()
    top, bottom = gt.cartons['std_m-00'], gt.cartons['small-01']
    np.testing.assert_allclose(top.pos[:2], bottom.pos[:2], atol=5e-3)
    assert top.pos[2] == pytest.approx(bottom.pos[2] + 0.06 + 0.09, abs=2e-3)
    assert gt.held is None


def test_fast_forward_jumps_the_arm_and_carries_the_sealed_carton():
    cell = Cell(cartons=_two_cartons())
    cell.settle(0.2)
    lid = cell.ground_truth().cartons['std_m-00'].lid
    t0 = cell.time
    cell.track(_point(ik_tool_down(lid + [0, 0, 0.0015], cell.q)), speed=0)
    assert cell.time == t0  # no physics time passes in a jump
    np.testing.assert_allclose(cell.tcp_pose()[0], lid + [0, 0, 0.0015], atol=1e-6)
    assert cell.set_vacuum(True).sealed
    goal = np.array([1.5, -0.4, 0.9])  # beyond the +X pallet edge
    cell.track(_point(ik_tool_down(goal, cell.q)), speed=0)
    gt = cell.ground_truth()
    np.testing.assert_allclose(gt.tcp_pos, goal, atol=1e-6)
    np.testing.assert_allclose(gt.cartons['std_m-00'].lid, goal - [0, 0, 0.0015], atol=1e-4)
    cell.settle(0.5)  # the servo holds the jumped pose with the carton
    np.testing.assert_allclose(cell.tcp_pose()[0], goal, atol=5e-4)
    # Release: the carton falls onto the floor (it is not over the pallet), physically.
    cell.set_vacuum(False)
    cell.settle(1.0)
    assert cell.ground_truth().cartons['std_m-00'].pos[2] < 0.2


def test_fast_forward_release_lets_the_carton_drop_onto_its_target_with_islands_asleep():
    # Held still after a jump, the carton's tree counts down towards sleep with the arm's
    # velocities all zero; released 4 mm above the lid below, it must still fall onto it
    # (it used to fall asleep in the air on the first step and stay there).
    cell = Cell(cartons=_two_cartons(), options=CellOptions(scene=SceneOptions(sleep=True)))
    cell.settle(0.2)
    lid = cell.ground_truth().cartons['std_m-00'].lid
    cell.track(_point(ik_tool_down(lid + [0, 0, 0.0015], cell.q)), speed=0)
    assert cell.set_vacuum(True).sealed
    target = cell.ground_truth().cartons['small-01'].lid + [0, 0, 0.18 + 0.004 + 0.0015]
    cell.track(_point(ik_tool_down(target, cell.q)), speed=0)
    cell.settle(0.5)
    cell.set_vacuum(False)
    cell.track(_point(ik_tool_down(target + [0, 0, 0.2], cell.q)), speed=0)
    cell.settle(1.25)
    gt = cell.ground_truth()
    top, bottom = gt.cartons['std_m-00'], gt.cartons['small-01']
    assert top.pos[2] == pytest.approx(bottom.pos[2] + 0.06 + 0.09, abs=1e-3)


def test_joint_state_reports_the_holding_torques():
    cell = Cell()
    cell.settle(0.3)
    q, qd, tau = cell.joint_state()
    np.testing.assert_allclose(q, [-1.5708, -1.5708, 1.5708, -1.5708, -1.5708, 0.0], atol=1e-6)
    np.testing.assert_allclose(qd, 0.0, atol=1e-6)
    # Shoulder lift and elbow carry the arm against gravity; the base pan carries nothing.
    assert abs(tau[1]) > 10.0 and abs(tau[2]) > 5.0
    assert abs(tau[0]) < 1e-6


def test_negative_speed_is_rejected():
    cell = Cell()
    with pytest.raises(CellError, match='speed = -1'):
        cell.track(_point(cell.q), speed=-1)


def test_ground_truth_reports_pallet_and_cartons_by_package_id():
    cell = Cell(cartons=_two_cartons())
    cell.settle(0.3)
    gt = cell.ground_truth()
    assert set(gt.cartons) == {'std_m-00', 'small-01'}
    np.testing.assert_allclose(gt.pallet_pos, [0.6, 0.0, 0.072], atol=1e-3)
    assert gt.cartons['small-01'].dims == pytest.approx((0.30, 0.22, 0.12))
    np.testing.assert_allclose(gt.cartons['small-01'].lid[2], DECK + 0.12, atol=1e-3)


def test_level_cell_presents_picks_and_places_a_carton_in_lockstep():
    cell = Cell(load_config().level(11), seed=1)
    presented = cell.present()
    assert presented is not None
    pid = presented.package_id
    t_presented = cell.time
    assert t_presented > 0.0  # the feeder ran through the cell's own step()
    c = cell.ground_truth().cartons[pid]
    lid, H = c.lid, c.dims[2]
    above = lid + [0, 0, 0.25]
    cell.track(joint_move(cell.q, ik_tool_down(above, cell.q)))
    cell.track(cartesian_move(cell.q, above, lid + [0, 0, 0.0015], 2.0, 0.3))
    assert cell.set_vacuum(True).sealed
    cell.track(cartesian_move(cell.q, lid + [0, 0, 0.0015], above, 2.0, 0.5))
    cell.release(pid)
    target = np.array([0.6, -0.1, DECK + H + 0.002])
    high = target + [0, 0, 0.4]
    cell.track(cartesian_move(cell.q, above, high, 2.0, 1.0))
    cell.track(cartesian_move(cell.q, high, target, 2.0, 0.3))
    cell.set_vacuum(False)
    cell.settle(1.25)
    placed = cell.ground_truth().cartons[pid]
    np.testing.assert_allclose(placed.lid[:2], target[:2], atol=0.02)
    np.testing.assert_allclose(placed.lid[2], DECK + H, atol=3e-3)
    assert cell.source.state().pending == 3


def test_sleeping_islands_give_the_same_episode_as_an_awake_world():
    ends = {}
    for sleep in (False, True):
        cell = Cell(cartons=_two_cartons(), options=CellOptions(scene=SceneOptions(sleep=sleep)))
        cell.settle(1.5)
        if sleep:
            # Pallet and cartons are asleep; only the servoed arm stays awake.
            assert cell.data.ntree_awake == 1
        _episode(cell)
        ends[sleep] = cell.ground_truth()
    for pid in ('std_m-00', 'small-01'):
        np.testing.assert_allclose(
            ends[True].cartons[pid].pos, ends[False].cartons[pid].pos, atol=1e-4
        )


def test_stability_trials_wake_a_sleeping_stack_and_restore_the_option():
    proto = StabilityProtocol(levels_g=(0.8,), axes=('x',), beam=False, eumos=False)
    shifts = {}
    for sleep in (False, True):
        cell = Cell(cartons=_two_cartons(), options=CellOptions(scene=SceneOptions(sleep=sleep)))
        cell.settle(1.5)
        rep = cell.stability_trials(proto)
        shifts[sleep] = rep.trials[0].max_displacement
        flag = bool(cell.model.opt.enableflags & int(mujoco.mjtEnableBit.mjENBL_SLEEP))
        assert flag == sleep
    # The 0.8 g jolt really moved the cartons relative to the pallet in both worlds.
    assert shifts[False] > 1e-4
    assert shifts[True] == pytest.approx(shifts[False], abs=1e-3)


def test_same_level_and_seed_give_identical_states_through_the_source():
    cfg = load_config()
    opts = CellOptions.from_config(cfg.cell)
    assert opts.wrench_noise.force_sigma == cfg.cell.wrench.noise_force_n
    digests, wrenches = [], []
    for _ in range(2):
        cell = Cell(cfg.level(22), seed=5, options=opts)
        cell.present()
        cell.settle(0.3)
        digests.append(cell.state_digest())
        wrenches.append(cell.wrench().force)
    assert digests[0] == digests[1]
    np.testing.assert_array_equal(wrenches[0], wrenches[1])  # seeded sensor noise
    cell.reset(cfg.level(22), seed=6)
    cell.present()
    cell.settle(0.3)
    assert cell.state_digest() != digests[0]
