"""The real in-hand gauge for in-process runs: wrist wrench samples -> core.gauge.weigh.

Reads only the wrench sensor and the arm's joint angles (forward kinematics), like the
wrist_gauge node; it is not an oracle.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from palletizer.bridge.stream import KINEMATICS_EVERY, StepStream
from palletizer.core.contracts import Observation, PackageSpec
from palletizer.core.errors import PalletizerError
from palletizer.core.gauge import (
    GaugeParams,
    WeighError,
    average_wrench,
    off_plumb,
    weigh_held,
)
from palletizer.core.gauge_lift import LiftHistory, MotionGauge, sim_stamp, weigh_topped_up
from palletizer.core.gauge_motion import MotionGaugeParams
from palletizer.core.motion import UR10eKinematics
from palletizer.sim.robot import ARM_JOINTS

__all__ = ['WristGauge']


class WristGauge:
    """Tare with the gripper empty, zero again after each place, weigh each carton from one
    still, plumb reading.

    It sees the sensor exactly as the wrist_gauge node does through the cell bridge: a sample
    every `every` physics steps while the world advances (the bridge's wrench stream, cell.yaml
    wrench.rate_hz) plus one after each hold, and it averages the last `samples` of them after
    holding the arm still for `hold_s` (by default settle_s + the samples' span).

    The sensor drifts (cell.yaml wrench.drift_*), so the episode's first tare goes stale. The
    tare model is the empty gripper's wrench with the tool plumb, the same at every plumb pose;
    a zero (the episode loop calls it once the empty arm waits above the source) reads the
    empty tool again and replaces the tare: the next weigh then sees only the drift of one
    pick, like a UR driver's zero_ftsensor before each use.

    With `lift_skip_s` set (configs/perception.yaml gauge.lift_skip_s), it first weighs on the
    lift (core.gauge_lift): the last `history_s` of the streams as the node gets them, the
    wrench at every sample and the joint angles and rates at the bridge's joint-state rate
    (`joint_every` steps) and once more when asked, fitted with the tool's motion. A converged
    fit is the reading and the arm does not stop; otherwise it holds still a step at a time,
    fitting again after each (core.gauge_lift.weigh_topped_up), and weighs as above once
    hold_s is nearly held. `last_weigh` says which: 'lift', 'lift_hold' (the fit converged
    after a hold), 'still' or '' (none yet).

    With `zero_on_move` set (configs/perception.yaml gauge.zero_on_move) a zero given the time
    its empty move began (`moved_since`) first takes the tare from that move's readings
    (core.gauge_lift.zero_on_move) and holds still only where they are less certain than a
    still zero. `last_zero` says which: 'move', 'still' or '' (none yet).
    """

    oracle = False

    def __init__(
        self,
        cell,
        kinematics: UR10eKinematics | None = None,
        samples: int = 30,
        hold_s: float | None = None,
        still_speed: float = 0.008,
        tcp_offset: float = 0.092,
        cup_gap: float = 0.0015,
        params: GaugeParams | None = None,
        every: int = 10,
        settle_s: float = 0.3,
        lift_skip_s: float | None = None,
        history_s: float = 8.0,
        zero_on_move: bool = False,
        motion_params: MotionGaugeParams | None = None,
        joint_every: int = KINEMATICS_EVERY,
    ) -> None:
        self.cell = cell
        self.kin = kinematics or UR10eKinematics()
        self.samples = samples
        self.every = int(every)
        span = samples * self.every * float(cell.model.opt.timestep)
        self.hold_s = hold_s if hold_s is not None else span + settle_s
        self.still_speed = still_speed
        self.tcp_offset = tcp_offset
        self.cup_gap = cup_gap
        self.params = params or GaugeParams()
        self._tare: np.ndarray | None = None
        self._buffer: deque[np.ndarray] = deque(maxlen=samples)
        self.lift_skip_s = lift_skip_s
        self.joint_every = int(joint_every)
        self._motion = MotionGauge(
            LiftHistory(float(history_s)),
            self.kin,
            tcp_offset,
            cup_gap,
            motion_params or MotionGaugeParams(),
            lift_skip_s or 0.0,
            samples,
        )
        self._history = self._motion.history
        self.zero_on_move = bool(zero_on_move)
        self.last_weigh = ''
        self.last_zero = ''

    @property
    def _streams(self) -> bool:
        """Whether the gauge keeps the streams' history (to weigh on the lift or zero on the
        move)."""
        return self.lift_skip_s is not None or self.zero_on_move

    def attach(self) -> None:
        """Start streaming on the (freshly reset) cell, as the bridge does."""
        self._buffer.clear()
        self._history.clear()
        StepStream(self._sample, every=self.every).attach(self.cell)
        if self._streams:
            StepStream(self._sample_joints, every=self.joint_every).attach(self.cell)

    def _sample(self) -> None:
        w = self.cell.wrench()
        row = np.concatenate([w.force, w.torque])
        self._buffer.append(row)
        if self._streams:
            self._history.add_wrench(sim_stamp(self.cell.time), row)

    def _sample_joints(self) -> None:
        q, qd, _ = self.cell.joint_state()
        self._history.add_joints(sim_stamp(self.cell.time), q, qd)

    def _read(self, held: float = 0.0) -> np.ndarray | None:
        """The still reading after hold_s [s] still, `held` of it already held."""
        self.cell.settle(max(0.0, self.hold_s - held))
        self._sample()  # the bridge publishes the state once more after each call
        m = self.cell.model
        dofs = [int(m.joint(j).dofadr[0]) for j in ARM_JOINTS]
        if float(np.abs(self.cell.data.qvel[dofs]).max()) > self.still_speed:
            return None
        try:
            return average_wrench(np.array(self._buffer), self.params)
        except WeighError:
            return None

    def _empty(self) -> np.ndarray | str:
        """A reading of the empty tool, still and plumb [N, N m], or why there is none."""
        reading = self._read()
        if reading is None:
            return 'the arm was not still'
        return off_plumb(self.kin, self.cell.q, self.params) or reading

    def tare(self) -> np.ndarray:
        """Average wrench with nothing on the cups [N, N m]."""
        reading = self._empty()
        if isinstance(reading, str):
            raise PalletizerError(f'wrist gauge: no tare: {reading}')
        self._tare = reading
        return reading

    def zero(self, moved_since: float | None = None) -> bool:
        """Tare again with the gripper empty (after a place); False keeps the previous tare.

        moved_since: the sim time [s] the empty tool's move to here began; with zero_on_move
        the tare comes from that move where it is certain enough, without holding still."""
        if self.zero_on_move and moved_since is not None:
            self._sample_joints()  # the state the bridge publishes after the move's last call
            z = self._motion.zero(sim_stamp(self.cell.time), sim_stamp(moved_since), self._tare)
            if z.tare is not None:
                self._tare = z.tare
                self.last_zero = 'move'
                return True
        self.last_zero = 'still'
        reading = self._empty()
        if isinstance(reading, str):
            return False
        self._tare = reading
        return True

    def weigh(self, observation: Observation) -> PackageSpec | None:
        if self._tare is None:
            raise PalletizerError(
                'wrist gauge: weigh() before tare(); tare with the gripper empty'
            )
        self.last_weigh = ''
        held = 0.0
        if self.lift_skip_s is not None:
            on_lift, held = weigh_topped_up(
                lambda: self._weigh_on_lift(observation), self.cell.settle, self.hold_s
            )
            if on_lift is not None:
                self.last_weigh = 'lift' if held == 0 else 'lift_hold'
                return on_lift
        loaded = self._read(held)
        if loaded is None:
            return None
        try:
            reading = weigh_held(
                self._tare,
                loaded,
                observation,
                self.cell.q,
                kin=self.kin,
                tcp_offset=self.tcp_offset,
                cup_gap=self.cup_gap,
                params=self.params,
            )
        except WeighError:
            return None
        self.last_weigh = 'still'
        return reading.spec

    def _weigh_on_lift(self, observation: Observation) -> PackageSpec | None:
        """The carton weighed on the lift just made, or None when that fit did not converge."""
        assert self._tare is not None and self.lift_skip_s is not None
        self._sample_joints()  # the state the bridge publishes after the pick's last call
        spec, _ = self._motion.weigh(sim_stamp(self.cell.time), self._tare, observation)
        return spec  # None: the fit did not converge or found nothing; the still reading decides
