"""Pick and place sequencing over a recording arm: refusals move nothing, verdicts come from F."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from palletizer.core.contracts import HeightMap, Observation, PackageSpec, PlacementPlan
from palletizer.core.cycle import CycleClock
from palletizer.core.motion import HOME_Q, CartonPose, JointTrajectory, yaw_of
from palletizer.core.motion.path import wrap_pi
from palletizer.core.vocab import CyclePhase
from palletizer.execution import (
    ExecResult,
    FollowResult,
    ForceReading,
    Outcome,
    PickPlaceSequencer,
    SequencerExecutor,
    controller_cause,
    cycle_phase,
)

GRIPPER = np.array([0.0, 0.0, -60.0])  # empty tool weight in the sensor frame [N]
DIMS = (0.40, 0.30, 0.30)


class RecordingArm:
    """Transport double: records goals and I/O, moves q to each goal's end, reads a wrench
    that includes the carton while the vacuum holds it."""

    def __init__(self, payload_kg: float = 4.0, seals: bool = True, lets_go: bool = True):
        self.q = np.array(HOME_Q)
        self.goals: list[JointTrajectory] = []
        self.io: list[bool] = []
        self.payload_kg = payload_kg
        self.seals = seals
        self.lets_go = lets_go
        self.holding = False
        self.fail_goal: int | None = None  # index of the goal the controller aborts
        self.ticks: list[float] = []
        self.wrench_reads = 0

    def joint_positions(self):
        return self.q.copy()

    def follow(self, traj, progress):
        self.goals.append(traj)
        if self.fail_goal == len(self.goals) - 1:
            return FollowResult(False, -4, 'shoulder_lift_joint path tolerance violated')
        for t in np.linspace(0.0, traj.duration, 9):
            self.ticks.append(float(t))
            progress(float(t))
        self.q = np.asarray(traj.q[-1]).copy()
        return FollowResult(True)

    def set_vacuum(self, on):
        self.io.append(on)
        if on and self.seals:
            self.holding = True
        if not on and self.lets_go:
            self.holding = False
        return FollowResult(True)

    def vacuum_holding(self):
        return self.holding

    def wrench_after_motion(self):
        self.wrench_reads += 1
        f = GRIPPER + ([0.0, 0.0, -self.payload_kg * 9.81] if self.holding else 0.0)
        return ForceReading(tuple(f), 5, 0.0)


def _changes(phases: list[str]) -> list[str]:
    return [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]


def _obs(x=-0.2, y=-0.8, dims=DIMS):
    return Observation('std_m-00', (x, y, 0.58 + dims[2] / 2), 0.0, dims, 0.9)


def _place_args(z_stack: float | None = None):
    cells = np.zeros((80, 120))
    if z_stack is not None:
        cells[10:30, 20:40] = z_stack  # a stack around the target (0.3, -0.2)
    plan = PlacementPlan((0.3, -0.2, 0.144 + DIMS[2] / 2), 0.0, 1, 's-0', 0.8, 1.0)
    spec = PackageSpec('std_m-00', 'std_m', DIMS, 4.0)
    return plan, spec, HeightMap(cells)


def test_unreachable_pick_is_refused_before_any_goal_is_sent():
    arm = RecordingArm()
    res = PickPlaceSequencer(arm).pick(_obs(x=2.5))
    assert res.outcome is Outcome.IK_UNREACHABLE and res.cause == 'ik_unreachable'
    assert res.failing_waypoint == 0 and 'failing waypoint 0 cross' in res.message
    assert arm.goals == [] and arm.io == []


def test_colliding_place_is_refused_before_any_goal_is_sent():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    assert seq.pick(_obs()).ok
    sent = len(arm.goals)
    res = seq.place(*_place_args(z_stack=0.6))
    assert res.outcome is Outcome.COLLISION and res.cause == 'collision'
    assert res.failing_waypoint == 2 and 'hits height_map' in res.message
    assert len(arm.goals) == sent and arm.io == [True]


def test_carton_no_cup_block_holds_is_refused_as_grasp_slip_before_moving():
    arm = RecordingArm()
    res = PickPlaceSequencer(arm).pick(_obs(dims=(0.03, 0.03, 0.3)))
    assert res.outcome is Outcome.GRASP_SLIP and res.failing_waypoint == -1
    assert 'no cup block holds the carton' in res.message
    assert arm.goals == [] and arm.io == []


def test_pick_moves_seals_lifts_and_reports_the_grasp():
    arm = RecordingArm()
    seen: list[tuple[str, float]] = []
    res = PickPlaceSequencer(arm).pick(_obs(), feedback=lambda ph, pr: seen.append((ph, pr)))
    assert res.ok and res.cause == '' and res.message == 'holding 4.00 kg'
    assert len(arm.goals) == 2 and arm.io == [True]
    # The lift starts where the approach ended: one continuous motion across the two goals.
    np.testing.assert_allclose(arm.goals[1].q[0], arm.goals[0].q[-1], atol=1e-9)
    assert res.active_cups == 16 and res.grip_capacity_ratio == 0.0  # mass not known yet
    np.testing.assert_allclose(res.motion_s, arm.goals[0].duration + arm.goals[1].duration)
    assert _changes([ph for ph, _ in seen]) == ['cross', 'descend', 'seal', 'lift', 'verify']
    progress = [pr for _, pr in seen]
    assert progress == sorted(progress) and progress[-1] == 1.0


def test_pick_that_does_not_seal_is_a_grasp_slip_from_the_wrench():
    arm = RecordingArm(seals=False)
    res = PickPlaceSequencer(arm).pick(_obs())
    assert res.outcome is Outcome.GRASP_SLIP and res.cause == 'grasp_slip'
    assert 'nothing is held' in res.message and len(arm.goals) == 2


def test_controller_abort_stops_the_pick_with_the_controllers_message():
    arm = RecordingArm()
    arm.fail_goal = 0
    res = PickPlaceSequencer(arm).pick(_obs())
    assert res.outcome is Outcome.CONTROLLER_FAILED and res.cause == 'collision'
    assert 'error_code -4: shoulder_lift_joint path tolerance violated' in res.message
    assert arm.io == [] and len(arm.goals) == 1


def test_place_releases_and_verifies_against_the_pre_pick_tare():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    assert seq.pick(_obs()).ok
    seen: list[str] = []
    res = seq.place(*_place_args(), feedback=lambda ph, pr: seen.append(ph))
    assert res.ok and res.message == 'released' and res.failing_waypoint == -1
    assert arm.io == [True, False] and len(arm.goals) == 4
    assert _changes(seen) == ['cross', 'descend', 'release', 'retract']
    assert seq.grasp is None and seq.tare is None


@pytest.mark.parametrize('obs_yaw', [0.0, 1.2, -2.5, 3.0])
@pytest.mark.parametrize('plan_yaw', [0.0, math.pi / 2, math.pi, -math.pi / 2])
def test_the_carton_frame_ends_at_the_planned_yaw_not_a_half_turn_off(obs_yaw, plan_yaw):
    """The weighed CoG is in the observed frame: the place turns the tool so that frame lands
    at the plan's yaw (a planner turns an off-centre CoG by a half turn on purpose)."""
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    obs = dataclasses.replace(_obs(), yaw=obs_yaw)
    assert seq.pick(obs).ok
    kin = seq.motion.kin
    frame_in_tool = obs_yaw - float(yaw_of(kin.fk(arm.q)))
    plan, spec, hm = _place_args()
    plan = dataclasses.replace(plan, yaw=plan_yaw)
    assert seq.place(plan, spec, hm).ok
    frame = float(yaw_of(kin.fk(arm.goals[-2].q[-1]))) + frame_in_tool
    assert abs(wrap_pi(frame - plan_yaw)) < 1e-3, (frame, plan_yaw)
    assert seq.held_turn is None  # released


def test_the_placed_carton_is_an_obstacle_until_the_next_height_map():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    assert seq.world(None).placed == ()
    assert seq.pick(_obs()).ok
    plan, spec, hm = _place_args()
    assert seq.place(plan, spec, hm).ok
    (box,) = seq.world(hm).placed
    x, y, z = plan.position
    np.testing.assert_allclose(np.add(box.lo, box.hi) / 2, (x, y, z))
    assert box.hi[2] == pytest.approx(z + spec.dims_m[2] / 2)
    seq.heightmap_updated()
    assert seq.world(hm).placed == ()


def test_a_carton_set_aside_off_the_map_stays_an_obstacle_until_it_is_picked_back():
    """Level 16 seed 10: a carton set aside on the auxiliary table was dropped from the
    collision world at the next (pallet) height map, and a carried carton swept through it."""
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    dims = (0.30, 0.20, 0.12)
    assert seq.pick(_obs(dims=dims)).ok
    _, _, hm = _place_args()
    spec = PackageSpec('small-00', 'small', dims, 2.0)
    aside = PlacementPlan((-0.37, -0.10, 0.62 + dims[2] / 2), 0.0, 1, 'buffer-0', 0.0, 1.0)
    res = seq.place(aside, spec, hm)
    assert res.ok, res.message
    seq.heightmap_updated()
    (box,) = seq.world(hm).placed
    np.testing.assert_allclose(np.add(box.lo, box.hi) / 2, aside.position)
    # A pick elsewhere keeps it; the pick of the set-aside carton takes it out.
    assert seq.pick(_obs()).ok
    assert seq.world(hm).placed == (box,)
    plan, spec, hm = _place_args()
    assert seq.place(plan, spec, hm).ok
    seq.heightmap_updated()
    obs = Observation('small-00', aside.position, 0.0, dims, 0.9)
    res = seq.pick(obs)
    assert res.ok, res.message
    assert seq.world(hm).placed == ()
    seq.new_episode()
    assert seq.world(hm).placed == ()


def test_place_that_keeps_the_carton_is_a_grasp_slip():
    arm = RecordingArm(lets_go=False)
    seq = PickPlaceSequencer(arm)
    assert seq.pick(_obs()).ok
    res = seq.place(*_place_args())
    assert res.outcome is Outcome.GRASP_SLIP and 'still holding' in res.message


def test_place_without_a_pick_in_this_process_checks_the_force_drop():
    arm = RecordingArm()
    arm.holding = True  # picked before a restart: no tare, no grasp remembered
    seq = PickPlaceSequencer(arm)
    res = seq.place(*_place_args())
    assert res.ok and arm.io == [False]


@pytest.mark.parametrize(('seals', 'lets_go'), [(True, True), (False, True), (True, False)])
def test_vacuum_sensor_judges_when_the_wrench_is_not_used(seals, lets_go):
    arm = RecordingArm(seals=seals, lets_go=lets_go)
    seq = PickPlaceSequencer(arm, use_wrench=False)
    picked = seq.pick(_obs())
    assert picked.ok == seals
    if seals:
        placed = seq.place(*_place_args())
        assert placed.ok == lets_go
        if not lets_go:
            assert placed.outcome is Outcome.GRASP_SLIP and 'still sealed' in placed.message
    else:
        assert picked.outcome is Outcome.GRASP_SLIP and 'no seal' in picked.message
    assert arm.wrench_reads == 0


def test_missing_joint_state_fails_without_moving():
    arm = RecordingArm()
    arm.joint_positions = lambda: None
    res = PickPlaceSequencer(arm).pick(_obs())
    assert res == ExecResult(Outcome.CONTROLLER_FAILED, 'no joint state received yet', 'timeout')
    assert arm.goals == []


@pytest.mark.parametrize(
    ('code', 'cause'),
    [
        (-4, 'collision'),
        (-5, 'collision'),
        (-1, 'ik_unreachable'),
        (-2, 'ik_unreachable'),
        (None, 'timeout'),
    ],
)
def test_controller_failures_map_to_the_closed_vocabulary(code, cause):
    assert controller_cause(code) == cause


def test_arrival_timeline_follows_the_tcp_through_rounded_corners():
    from palletizer.execution import arrival_timeline

    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    assert seq.pick(_obs()).ok
    target = CartonPose(0.3, -0.2, 0.144 + DIMS[2] / 2, 0.0, DIMS)
    plan = seq.motion.plan_place(arm.q, target, seq.grasp)
    assert plan.ok, plan.message
    n = len(plan.waypoints) - 1
    tl = arrival_timeline(plan.trajectory, plan.waypoints[:n], seq.motion.kin)
    ends = [t for t, _ in tl]
    assert ends == sorted(ends) and ends[-1] == plan.trajectory.duration
    # The cross ends while the arm still moves (a rounded corner), before the descent.
    phases = [p for _, p in tl]
    assert 'cross' in phases and phases[-1] == 'descend'
    i = phases.index('cross')
    k = int(np.searchsorted(plan.trajectory.t, ends[i]))
    assert 0 < ends[i] < ends[-1]
    assert np.abs(plan.trajectory.qd[k]).max() > 0.05


class ClockedArm(RecordingArm):
    """A recording arm on a sim clock: each goal takes its duration plus a still dwell [s]."""

    def __init__(self, dwell_s: float = 0.25):
        super().__init__()
        self.t, self.dwell_s = 0.0, dwell_s

    def follow(self, traj, progress):
        out = super().follow(traj, progress)
        self.t += traj.duration + self.dwell_s
        return out


def test_with_a_clock_pick_and_place_report_phases_that_tile_their_time():
    arm = ClockedArm()
    ex = SequencerExecutor(PickPlaceSequencer(arm, clock=lambda: arm.t))
    clock = CycleClock()
    clock.begin(CyclePhase.descend, 0.0)
    picked = ex.pick(_obs())
    assert picked.ok
    clock.marks_within(picked.phases, 0.0, arm.t)
    t_pick = arm.t
    placed = ex.place(*_place_args())
    assert placed.ok
    clock.marks_within(placed.phases, t_pick, arm.t)
    spans = clock.close(arm.t)
    P = CyclePhase
    assert [s.phase for s in spans] == [
        P.return_,  # the cross to above the carton
        P.descend,
        P.dwell,
        P.lift,  # the seal switched in no time
        P.dwell,
        P.cross,
        P.place,
        P.dwell,
        P.retract,
        P.dwell,
    ]
    assert spans[0].start_s == 0.0 and spans[-1].end_s == pytest.approx(arm.t)
    for a, b in zip(spans, spans[1:], strict=False):
        assert a.end_s == b.start_s
    assert [s.duration_s for s in spans if s.phase is P.dwell] == pytest.approx([0.25] * 4)
    # The first goal (the approach) ends where its dwell begins.
    assert spans[2].start_s == pytest.approx(arm.goals[0].duration, abs=1e-3)


def test_without_a_clock_the_executor_reports_no_phases():
    ex = SequencerExecutor(PickPlaceSequencer(RecordingArm()))
    assert ex.pick(_obs()).phases == ()


def test_feedback_phases_map_to_the_cycle_by_side():
    assert cycle_phase('descend', placing=False) is CyclePhase.descend
    assert cycle_phase('descend', placing=True) is CyclePhase.place
    assert cycle_phase('cross', placing=False) is CyclePhase.return_
    assert cycle_phase('rise', placing=True) is CyclePhase.cross
    assert cycle_phase('verify', placing=True) is CyclePhase.retract
    assert cycle_phase('dwell', placing=True) is CyclePhase.dwell
