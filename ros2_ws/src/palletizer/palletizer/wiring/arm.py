"""The arm port on the simulated cell: what the UR driver gives the sequencer, in process.

The cell bridge serves the same arm to the trajectory_executor node over FollowJointTrajectory,
SetIO, /joint_states, the wrench topic and the vacuum sensor; here PickPlaceSequencer calls the
Cell directly, so batch runs and the node graph execute one pick/place implementation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from palletizer.bridge.fjt import FjtDefaults
from palletizer.bridge.stream import StepStream
from palletizer.core.errors import InvalidValue
from palletizer.core.jtc import JointTolerance, check_tolerance
from palletizer.core.motion import JointTrajectory
from palletizer.execution import FollowResult, ForceReading
from palletizer.sim.robot import ARM_JOINTS
from palletizer.sim.servo import Trajectory

__all__ = ['CellArm', 'GOAL_TOLERANCE_VIOLATED', 'PATH_TOLERANCE_VIOLATED']

# control_msgs/FollowJointTrajectory error codes
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5
_FJT = FjtDefaults()


class CellArm:
    """ArmPort over a Cell: speed 0 = fast-forward (the arm jumps to each goal's end, no sim
    time passes), > 0 = the servos track each trajectory in lockstep.

    path_tolerance_rad: joint tracking error that aborts a goal, the cell bridge's default
    FollowJointTrajectory path tolerance, so both wirings stop on the same events [rad].
    goal_tolerance_rad, goal_time_s: the bridge's default goal tolerance and goal time. A joint
    further than goal_tolerance_rad from the goal's end when the trajectory ends (the arm is
    pressed against something) gets up to goal_time_s more, in control ticks of
    `control_steps` physics steps, to come within it at rest, as the bridge's controller gives
    it; then the goal is aborted. An arm already within it takes no extra step, so the check
    changes nothing where the arm arrives.
    dwell_s: a servo-tracked goal then holds its last point this long, as the node appends a
    still dwell to each goal, and the wrench is sampled every `wrench_every` physics steps
    meanwhile [s]. The wrench is read only when asked (wrench_after_motion) or during a dwell,
    so a run that judges by the vacuum sensor draws no sensor noise beyond the gauge's.
    """

    def __init__(
        self,
        cell,
        speed: float = 0.0,
        path_tolerance_rad: float = _FJT.path_position,
        dwell_s: float = 0.0,
        wrench_every: int = 10,
        goal_tolerance_rad: float = _FJT.goal_position,
        goal_time_s: float = _FJT.goal_time,
        control_steps: int = 10,
    ) -> None:
        if speed < 0 or dwell_s < 0:
            raise InvalidValue(f'speed = {speed}, dwell_s = {dwell_s}; expected both >= 0')
        self.cell = cell
        self.speed = float(speed)
        self.path_tolerance_rad = float(path_tolerance_rad)
        self.dwell_s = float(dwell_s)
        self.wrench_every = int(wrench_every)
        self.goal_tolerance_rad = float(goal_tolerance_rad)
        self.goal_time_s = float(goal_time_s)
        self.control_steps = int(control_steps)
        self.tracking_error_m = 0.0  # worst TCP tracking error seen [m]
        self.motion_time_s = 0.0  # trajectory time executed [s]
        self._dwell: list[np.ndarray] = []  # forces sampled in the last goal's dwell [N]

    def joint_positions(self) -> np.ndarray | None:
        return self.cell.q

    def follow(self, traj: JointTrajectory, progress: Callable[[float], None]) -> FollowResult:
        t = Trajectory(
            np.asarray(traj.t), np.asarray(traj.q), np.asarray(traj.qd), np.asarray(traj.qdd)
        )
        self._dwell = []
        res = self.cell.track(t, speed=self.speed)
        self.tracking_error_m = max(self.tracking_error_m, float(res.max_tcp_error))
        self.motion_time_s += float(t.t[-1])
        progress(traj.duration)
        worst = float(np.max(res.max_joint_error))
        if worst > self.path_tolerance_rad:
            # Like a controller's path tolerance: the arm or its load hit something the checks
            # did not model (arm links, walls), and the goal is aborted.
            return FollowResult(
                False,
                PATH_TOLERANCE_VIOLATED,
                f'a joint left its path by {worst:.3f} rad (TCP {res.max_tcp_error * 1000:.0f} '
                f'mm, {res.saturated_steps} torque-saturated steps): something was hit',
            )
        if self.speed > 0:
            late = self._goal_check(np.asarray(traj.q[-1], dtype=float))
            if late is not None:
                return FollowResult(False, GOAL_TOLERANCE_VIOLATED, late)
        if self.speed > 0 and self.dwell_s > 0:
            stream = StepStream(self._sample_dwell, every=self.wrench_every)
            stream.attach(self.cell)
            try:
                self.cell.settle(self.dwell_s)
            finally:
                self.cell.remove_before_step(stream)
        return FollowResult(True)

    def _goal_check(self, q_goal: np.ndarray) -> str | None:
        """None when the arm ends within the goal tolerance, else why the goal is aborted."""
        if self.goal_tolerance_rad <= 0:
            return None
        goal = tuple(
            JointTolerance(self.goal_tolerance_rad, _FJT.stopped_velocity) for _ in ARM_JOINTS
        )
        # Position only at the end: an arm within it takes no extra physics step.
        if check_tolerance(goal, q_goal - self.cell.q) is None:
            return None
        ticks = int(np.ceil(self.goal_time_s / (self.control_steps * self.cell.dt) - 1e-9))
        bad: str | None = None
        for _ in range(ticks):
            self.cell.step(self.control_steps)
            q, qd, _ = self.cell.joint_state()
            bad = check_tolerance(goal, q_goal - np.asarray(q), -np.asarray(qd), ARM_JOINTS)
            if bad is None:
                return None
        return f'goal tolerance violated {self.goal_time_s:.3f} s after the end: {bad}'

    def _sample_dwell(self) -> None:
        self._dwell.append(np.asarray(self.cell.wrench().force, dtype=float))

    def set_vacuum(self, on: bool) -> FollowResult:
        # The IO is switched whether or not the cups seal, as over SetIO: the sequencer judges
        # the seal after the lift.
        self.cell.set_vacuum(on)
        return FollowResult(True)

    def wrench_after_motion(self) -> ForceReading | None:
        """Mean force of the last goal's dwell samples plus one now; one sample without a dwell."""
        rows = [*self._dwell, np.asarray(self.cell.wrench().force, dtype=float)]
        mean = np.mean(rows, axis=0)
        return ForceReading(
            (float(mean[0]), float(mean[1]), float(mean[2])), len(rows), float(self.cell.time)
        )

    def vacuum_holding(self) -> bool | None:
        return self.cell.suction.held is not None
