"""FollowJointTrajectory execution on the simulated cell: control ticks, tolerances, cancel."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from palletizer.core.jtc import (
    GOAL_TOLERANCE_VIOLATED,
    INVALID_GOAL,
    PATH_TOLERANCE_VIOLATED,
    SUCCESSFUL,
    GoalError,
    JointTolerance,
    SampledTrajectory,
    ToleranceSet,
    check_tolerance,
    resolve_tolerances,
    validate_goal,
)
from palletizer.sim.servo import Trajectory

__all__ = ['FjtDefaults', 'FjtOutcome', 'FjtRunner', 'FjtStatus', 'PreparedGoal', 'Tick']

# The servo refuses sampled speeds more than 1 % over the UR limits (sim/servo.py); the goal
# check uses the same margin so a goal accepted here is one the servo would track.
_SPEED_TOLERANCE = 0.01

JointTol = tuple[str, float, float, float]


@dataclass(frozen=True)
class FjtDefaults:
    """Controller default tolerances, used where a goal gives 0 (ros2_control semantics).

    path_position 0.1 rad: the servo follows a full-speed move within about 1 mm at the TCP
    (tests/sim/test_servo.py), so only a blocked or saturated arm strays this far.
    goal_position 0.01 rad: about 13 mm at the 1.3 m reach; the servo settles well inside it.
    goal_time 0.5 s: a critically damped 40 rad/s servo settles in about 0.15 s; the rest is
    margin for a heavy carton.
    stopped_velocity 0.01 rad/s: the end state must also be at rest (the UR driver's default).
    """

    path_position: float = 0.1  # [rad]
    goal_position: float = 0.01  # [rad]
    goal_time: float = 0.5  # [s]
    stopped_velocity: float = 0.01  # [rad/s]

    def tolerance_set(self, n: int) -> ToleranceSet:
        """The defaults as a ToleranceSet for `n` joints."""
        return ToleranceSet(
            tuple(JointTolerance(self.path_position) for _ in range(n)),
            tuple(JointTolerance(self.goal_position, self.stopped_velocity) for _ in range(n)),
            self.goal_time,
        )


class FjtStatus(Enum):
    """How a goal ended: succeeded, aborted (error_code says why) or canceled."""

    succeeded = 'succeeded'
    aborted = 'aborted'
    canceled = 'canceled'


@dataclass(frozen=True)
class Tick:
    """Feedback of one control tick: time from goal start [s], desired / actual / error
    positions [rad] and velocities [rad/s], each (n,) in controller joint order."""

    time: float
    desired_q: np.ndarray
    desired_qd: np.ndarray
    actual_q: np.ndarray
    actual_qd: np.ndarray

    @property
    def error_q(self) -> np.ndarray:
        return self.desired_q - self.actual_q

    @property
    def error_qd(self) -> np.ndarray:
        return self.desired_qd - self.actual_qd


@dataclass(frozen=True)
class FjtOutcome:
    """Result of one executed goal: status, FollowJointTrajectory error_code and message, the
    number of control ticks and the simulated time it took [s]."""

    status: FjtStatus
    error_code: int
    error_string: str
    ticks: int
    sim_time: float


@dataclass(frozen=True)
class PreparedGoal:
    """A goal that passed every check: the sampled trajectory and its resolved tolerances."""

    trajectory: SampledTrajectory
    tolerances: ToleranceSet


class FjtRunner:
    """Executes FollowJointTrajectory goals on a Cell like ros2_control's JTC on a real UR.

    The goal is sampled at the physics rate and executed in control ticks of `control_steps`
    physics steps; after each tick the feedback callback runs, the path tolerance is checked
    and the cancel hook is asked. speed 0 = fast-forward: the arm is set at the final point at
    once (Cell.track with speed 0) and no physics time passes.

    `scaling()` is the UR's speed scaling in [0, 1] (the speed slider times the controller's own
    scaling), read every physics step, as the scaled joint trajectory controller reads it: the
    trajectory's time advances by scaling x dt per step, so at 50 % a goal takes twice as long
    and still succeeds; at 0 the arm holds where the trajectory stands.
    """

    def __init__(
        self,
        cell: Any,
        joints: Sequence[str],
        lower: Sequence[float],
        upper: Sequence[float],
        speed_limits: Sequence[float],
        defaults: FjtDefaults = FjtDefaults(),
        speed: float = 1.0,
        control_steps: int = 10,  # 20 ms at the 2 ms physics step (docs/cell.md §3.9)
        scaling: Callable[[], float] = lambda: 1.0,
    ) -> None:
        if speed < 0 or not math.isfinite(speed):
            raise GoalError(INVALID_GOAL, f'speed = {speed}; expected 0 (fast-forward) or > 0')
        self.cell = cell
        self.joints = tuple(joints)
        self.lower = np.asarray(lower, float)
        self.upper = np.asarray(upper, float)
        self.speed_limits = np.asarray(speed_limits, float)
        self.defaults = defaults
        self.speed = float(speed)
        self.control_steps = int(control_steps)
        self.scaling = scaling

    def prepare(
        self,
        joint_names: Sequence[str],
        points: Sequence[Mapping[str, Any]],
        path_tolerance: Sequence[JointTol] = (),
        goal_tolerance: Sequence[JointTol] = (),
        goal_time_tolerance: float = 0.0,
    ) -> PreparedGoal:
        """Validate a goal against the current arm state; raises GoalError with its code."""
        traj = validate_goal(
            self.joints, joint_names, points, self.cell.q, self.lower.tolist(), self.upper.tolist()
        )
        tols = resolve_tolerances(
            self.joints,
            self.defaults.tolerance_set(len(self.joints)),
            path_tolerance,
            goal_tolerance,
            goal_time_tolerance,
        )
        if self.speed > 0:
            self._check_speed(traj)
        return PreparedGoal(traj, tols)

    def _check_speed(self, traj: SampledTrajectory) -> None:
        dt = float(self.cell.dt)
        n = int(math.ceil(traj.duration / dt - 1e-9))
        peak = np.zeros(len(self.joints))
        prev = traj.sample(0.0)[0]
        for k in range(1, n + 1):
            q, qd, _ = traj.sample(k * dt)
            # Finite differences too: a linear (position-only) goal reports its speed that way.
            np.maximum(peak, np.maximum(np.abs(qd), np.abs(q - prev) / dt), out=peak)
            prev = q
        over = peak > self.speed_limits * (1.0 + _SPEED_TOLERANCE)
        if np.any(over):
            j = int(np.argmax(over))
            raise GoalError(
                INVALID_GOAL,
                f'trajectory {self.joints[j]} speed {math.degrees(peak[j]):.1f} deg/s exceeds '
                f'the UR10e limit {math.degrees(self.speed_limits[j]):.0f} deg/s',
            )

    def execute(
        self,
        goal: PreparedGoal,
        on_tick: Callable[[Tick], None] = lambda tick: None,
        cancelled: Callable[[], bool] = lambda: False,
        event: Callable[[float], tuple[int, str] | None] = lambda share: None,
    ) -> FjtOutcome:
        """Run a prepared goal to its end, an abort, or a cancel (asked between ticks).

        `event(share)` is asked after each tick with the share of the trajectory's time run so
        far: the controller's own reasons to stop (a protective stop, the program stopped),
        as (error_code, error_string) to abort the goal with, the arm held where it stands.
        """
        if self.speed == 0:
            return self._jump(goal, on_tick)
        cell, traj, tols = self.cell, goal.trajectory, goal.tolerances
        dt = float(cell.dt)
        t0 = cell.time
        end = traj.duration
        # The trajectory's own time: dt per physics step at full speed, less when scaled. At
        # full speed it runs exactly as k * dt, in whole steps (sums of dt would drift from it
        # in the last bit and move the end of a goal by a control tick).
        n_traj = int(math.ceil(end / dt - 1e-9))  # steps of the trajectory proper
        n_window = int(math.ceil(tols.goal_time / dt - 1e-9))  # then of the goal-time window
        k = 0  # physics steps at full speed
        tau = 0.0  # trajectory time once scaled
        scaled = False
        after = 0  # physics steps taken past the trajectory's end
        ticks = 0

        def now() -> float:
            return tau if scaled else k * dt

        def within() -> bool:  # the trajectory proper still runs
            return tau < end - 1e-9 if scaled else k < n_traj

        while True:
            if cancelled():
                cell.servo.hold()
                return self._out(FjtStatus.canceled, SUCCESSFUL, 'goal canceled', ticks, t0)
            for _ in range(self.control_steps):
                s = min(max(float(self.scaling()), 0.0), 1.0)
                if s < 1.0 and not scaled:
                    scaled, tau = True, k * dt
                cell.servo.set_reference(*traj.sample(now()))
                cell.step(1)
                if not within():
                    after += 1
                if scaled:
                    tau = min(tau + s * dt, end) if tau < end else tau + dt
                k += 1
            ticks += 1
            q, qd, _ = cell.joint_state()
            dq, dqd, _ = traj.sample(now())
            tick = Tick(now(), dq, dqd, q, qd)
            on_tick(tick)
            stop = event(min(now() / end, 1.0) if end > 0 else 1.0)
            if stop is not None:
                cell.servo.hold()
                return self._out(FjtStatus.aborted, stop[0], stop[1], ticks, t0)
            if within():
                bad = check_tolerance(tols.path, tick.error_q, tick.error_qd, self.joints)
                if bad is not None:
                    cell.servo.hold()
                    return self._out(
                        FjtStatus.aborted,
                        PATH_TOLERANCE_VIOLATED,
                        f'path tolerance violated at t = {now():.3f} s: {bad}',
                        ticks,
                        t0,
                    )
                continue
            bad = check_tolerance(tols.goal, tick.error_q, tick.error_qd, self.joints)
            if bad is None:
                return self._out(FjtStatus.succeeded, SUCCESSFUL, '', ticks, t0)
            if after >= n_window:
                cell.servo.hold()
                return self._out(
                    FjtStatus.aborted,
                    GOAL_TOLERANCE_VIOLATED,
                    f'goal tolerance violated {tols.goal_time:.3f} s after the end: {bad}',
                    ticks,
                    t0,
                )

    def _jump(self, goal: PreparedGoal, on_tick: Callable[[Tick], None]) -> FjtOutcome:
        traj = goal.trajectory
        qf = traj.q[-1]
        z = np.zeros((1, len(qf)))
        self.cell.track(Trajectory(np.array([0.0]), qf[None, :], z, z), speed=0.0)
        q, qd, _ = self.cell.joint_state()
        on_tick(Tick(traj.duration, qf.copy(), np.zeros_like(qf), q, qd))
        return FjtOutcome(FjtStatus.succeeded, SUCCESSFUL, '', 1, 0.0)

    def _out(self, status: FjtStatus, code: int, msg: str, ticks: int, t0: float) -> FjtOutcome:
        return FjtOutcome(status, code, msg, ticks, self.cell.time - t0)
