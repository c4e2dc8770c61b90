"""The arm port on the simulated cell: what the UR driver gives the sequencer, in process.

The cell bridge serves the same arm to the trajectory_executor node over FollowJointTrajectory,
SetIO, /joint_states, the wrench topic and the vacuum sensor; here PickPlaceSequencer calls the
Cell directly, so batch runs and the node graph execute one pick/place implementation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from palletizer.bridge.stream import StepStream
from palletizer.core.errors import InvalidValue
from palletizer.core.motion import JointTrajectory
from palletizer.execution import FollowResult, ForceReading
from palletizer.sim.servo import Trajectory

__all__ = ['CellArm', 'PATH_TOLERANCE_VIOLATED']

PATH_TOLERANCE_VIOLATED = -4  # control_msgs/FollowJointTrajectory error code


class CellArm:
    """ArmPort over a Cell: speed 0 = fast-forward (the arm jumps to each goal's end, no sim
    time passes), > 0 = the servos track each trajectory in lockstep.

    path_tolerance_rad: joint tracking error that aborts a goal, the cell bridge's default
    FollowJointTrajectory path tolerance, so both wirings stop on the same events [rad].
    dwell_s: a servo-tracked goal then holds its last point this long, as the node appends a
    still dwell to each goal, and the wrench is sampled every `wrench_every` physics steps
    meanwhile [s]. The wrench is read only when asked (wrench_after_motion) or during a dwell,
    so a run that judges by the vacuum sensor draws no sensor noise beyond the gauge's.
    """

    def __init__(
        self,
        cell,
        speed: float = 0.0,
        path_tolerance_rad: float = 0.1,
        dwell_s: float = 0.0,
        wrench_every: int = 10,
    ) -> None:
        if speed < 0 or dwell_s < 0:
            raise InvalidValue(f'speed = {speed}, dwell_s = {dwell_s}; expected both >= 0')
        self.cell = cell
        self.speed = float(speed)
        self.path_tolerance_rad = float(path_tolerance_rad)
        self.dwell_s = float(dwell_s)
        self.wrench_every = int(wrench_every)
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
        if self.speed > 0 and self.dwell_s > 0:
            stream = StepStream(self._sample_dwell, every=self.wrench_every)
            stream.attach(self.cell)
            try:
                self.cell.settle(self.dwell_s)
            finally:
                self.cell.remove_before_step(stream)
        return FollowResult(True)

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
