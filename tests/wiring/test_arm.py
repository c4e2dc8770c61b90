"""The arm port on the simulated cell: the node's sequencer picks and returns a real carton."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from palletizer.bridge.stream import steps_per_sample
from palletizer.core.config import load_config
from palletizer.core.contracts import HeightMap
from palletizer.core.loads import draw_load
from palletizer.core.motion import MotionParams, MotionPlanner
from palletizer.execution import (
    Outcome,
    PickPlaceSequencer,
    VerifyParams,
    return_request,
    static_boxes,
)
from palletizer.sim.cell import Cell, CellOptions
from palletizer.wiring.arm import CellArm
from palletizer.wiring.oracles import OracleDetector

pytestmark = pytest.mark.sim

CFG = load_config()


def _setup(speed: float, **arm_kw):
    cell = Cell(CFG.level(11), 1, options=CellOptions.from_config(CFG.cell))
    arm = CellArm(cell, speed=speed, **arm_kw)
    seq = PickPlaceSequencer(
        arm,
        planner=MotionPlanner(params=MotionParams.from_config(CFG.cell)),
        static_boxes=static_boxes(CFG, 'table'),
        verify=VerifyParams(noise_force_n=float(CFG.cell.wrench.noise_force_n)),
        use_wrench=speed > 0,
    )
    shown = cell.present()
    return cell, arm, seq, OracleDetector(cell).detect(shown.package_id)


def test_fast_forward_jumps_each_goal_and_the_vacuum_sensor_judges_the_hold():
    cell, arm, seq, obs = _setup(0.0)
    try:
        t0 = cell.time
        res = seq.pick(obs)
        assert res.ok and res.message == 'holding' and arm.vacuum_holding()
        assert cell.time == t0 and arm.motion_time_s > 0  # no sim time passes
        plan, spec = return_request(obs)
        back = seq.place(plan, spec, HeightMap.flat())
        assert back.ok and back.message == 'released' and not arm.vacuum_holding()
        np.testing.assert_allclose(arm.joint_positions(), cell.q)
    finally:
        cell.close()


def test_servo_tracked_goals_hold_a_still_dwell_and_the_wrench_weighs_the_carton():
    every = steps_per_sample(float(CFG.cell.wrench.rate_hz), float(CFG.cell.physics.timestep))
    cell, arm, seq, obs = _setup(1.0, dwell_s=0.1, wrench_every=every)
    try:
        res = seq.pick(obs)
        assert res.ok, res.message
        truth = {d.package_id: d.mass for d in draw_load(11, 1, CFG)}[obs.package_id]
        held_kg = float(res.message.split()[1])
        assert abs(held_kg - truth) < 0.25, (held_kg, truth)  # |F| change over g
        reading = arm.wrench_after_motion()
        # A dwell of n sample periods streams n - 1 samples; the reading adds one after it.
        assert reading.samples == round(0.1 / (every * cell.model.opt.timestep))
        plan, spec = return_request(obs)
        back = seq.place(plan, spec, HeightMap.flat())
        assert back.ok and back.message.startswith('released'), back.message
        assert arm.tracking_error_m < 0.01
    finally:
        cell.close()


def test_a_goal_that_leaves_its_path_is_aborted_as_a_collision():
    cell, arm, seq, obs = _setup(1.0, path_tolerance_rad=1e-9)
    try:
        res = seq.pick(obs)
        assert res.outcome is Outcome.CONTROLLER_FAILED and res.cause == 'collision'
        assert 'error_code -4: a joint left its path' in res.message
        assert not arm.vacuum_holding()
    finally:
        cell.close()


def test_a_carton_pressed_into_its_support_aborts_the_goal_as_the_bridge_does():
    # A carton read 20 mm shorter than it is, set back down: the release pose is 20 mm into the
    # table. The arm stays within its path tolerance but cannot reach the goal's end; as the
    # cell bridge's controller, the goal is aborted (GOAL_TOLERANCE_VIOLATED) once the goal
    # time has passed. 10 mm short still settles within the 0.01 rad goal tolerance.
    for short, ok in ((0.010, True), (0.020, False)):
        cell, arm, seq, obs = _setup(1.0)
        try:
            assert seq.pick(obs).ok
            plan, spec = return_request(obs)
            d = spec.dims_m
            spec = dataclasses.replace(spec, dims_m=(d[0], d[1], d[2] - short))
            t0 = cell.time
            back = seq.place(plan, spec, HeightMap.flat())
            assert back.ok is ok, (short, back.message)
            if not ok:
                assert back.cause == 'collision'
                assert 'error_code -5: goal tolerance violated 0.500 s after the end' in (
                    back.message
                ), back.message
                # The goal ran to its end, then the whole goal time passed.
                assert cell.time - t0 >= back.motion_s + 0.5 - 1e-9
        finally:
            cell.close()


def test_an_arm_that_arrives_takes_no_extra_step_for_the_goal_check():
    times = []
    for tol in (0.0, 0.01):  # 0 disables the check
        cell, arm, seq, obs = _setup(1.0, goal_tolerance_rad=tol)
        try:
            assert seq.pick(obs).ok
            times.append((cell.time, arm.motion_time_s))
        finally:
            cell.close()
    assert times[0] == times[1]
