"""IK envelope: the pick poses of levels 11, 21 and 31 and a grid of pallet poses are reachable.

The pick poses are where the real sources present their cartons; every pallet pose of a 3 x 3
grid at deck + 0.10 and deck + 0.55 m is reached by a checked place plan from the lifted pick.
"""

from __future__ import annotations

import itertools

import pytest
from palletizer.core.config import load_config
from palletizer.core.motion import CartonPose, MotionPlanner
from palletizer.sim.cell import Cell
from palletizer.wiring.oracles import OracleDetector

pytestmark = pytest.mark.sim

CFG = load_config()


@pytest.mark.parametrize('level', [11, 21, 31])
def test_pick_poses_and_the_pallet_grid_are_reachable(level):
    cell = Cell(CFG.level(level), 1)
    planner = MotionPlanner()
    try:
        shown = cell.present()
        obs = OracleDetector(cell).detect(shown.package_id)
        x, y, z = obs.position
        pick = planner.plan_pick(cell.q, CartonPose(x, y, z, obs.yaw, obs.dims_guess))
        assert pick.ok, f'pick of {obs.package_id} at {obs.position}: {pick.message}'
        q_lifted = pick.q_end
        L, W, H = 0.42, 0.30, 0.18  # std_m, the level-11 carton
        failures = []
        for fx, fy, dz in itertools.product((-1, 0, 1), (-1, 0, 1), (0.10, 0.55)):
            target = CartonPose(
                0.60 + fx * 0.32 * 1.2, fy * 0.30 * 0.8, 0.144 + dz - H / 2, 0.0, (L, W, H)
            )
            res = planner.plan_place(q_lifted, target, pick.grasp)
            if not res.ok:
                failures.append((target.x, target.y, dz, res.cause, res.failing_name))
        assert failures == []
    finally:
        cell.close()
