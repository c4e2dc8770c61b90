"""Wrist gauge node: tare and in-hand weighing from the wrench stream (docs/perception.md §5).

It reads only the wrench topic and /joint_states (tool yaw and tilt by forward kinematics): on
the real UR10e the same node weighs from the real sensor. The world is paused between cell
calls, so the director holds the arm still (the cell's settle) before asking; the node uses the
latest samples and refuses when the arm was moving or the tool not plumb. The director tares
again after each place (a zero of the drifting sensor, wiring.gauge.WristGauge.zero in-process)
and sends the newest tare with each weigh.

With `on_lift` a weigh needs no hold: the node fits mass and CoM to the lift that ended at the
request's stamp (core.gauge_lift), from the last seconds of the wrench and joint-state streams
it keeps, and answers NOT_CONVERGED where that fit is not certain enough; the director then
holds and weighs still (configs/perception.yaml gauge.weigh_on_lift).

With `on_move` a tare needs no hold either: the node takes it from the empty tool's move since
the request's `moved_since` (core.gauge_lift.zero_on_move) and answers NOT_CONVERGED where that
is less certain than a still tare (configs/perception.yaml gauge.zero_on_move).
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
from palletizer_msgs.srv import Tare, Weigh
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from palletizer.core.config import load_config
from palletizer.core.description import JOINTS
from palletizer.core.gauge import (
    GaugeParams,
    WeighError,
    average_wrench,
    off_plumb,
    weigh_held,
)
from palletizer.core.gauge_lift import LiftHistory, MotionGauge
from palletizer.core.gauge_motion import MotionGaugeParams
from palletizer.core.motion import UR10eKinematics
from palletizer.core.streams import StampedBuffer
from palletizer.core.vocab import GaugeMode
from palletizer.nodes.convert import observation_from_msg, spec_to_msg
from palletizer.nodes.gauge_truth import GroundTruthGauge
from palletizer.nodes.params import declare
from palletizer.nodes.spin import run_node

__all__ = ['WristGaugeNode', 'main']


class WristGaugeNode(Node):
    def __init__(self) -> None:
        super().__init__('wrist_gauge')
        cfg = load_config()
        g = cfg.perception.gauge

        topic = declare(
            self,
            'wrench_topic',
            '/force_torque_sensor_broadcaster/wrench',
            'WrenchStamped topic of the flange F/T sensor',
        )
        self.samples = int(
            declare(self, 'samples', g.samples, 'wrench samples averaged per reading')
        )
        self.still_speed = float(
            declare(
                self,
                'still_speed',
                g.still_speed,
                'joint speed below which the arm counts as still [rad/s]',
            )
        )
        self.mode: str = declare(
            self,
            'mode',
            'wrench',
            'wrench = weigh from the sensor; oracle = the catalogue truth from the cell '
            '(marks the run oracle)',
        )
        if self.mode not in GaugeMode.names():
            raise SystemExit(
                f'wrist_gauge: mode:={self.mode!r}; expected one of {", ".join(GaugeMode.names())}'
            )
        truth = declare(
            self, 'ground_truth_service', '/cell_bridge/ground_truth', 'what the oracle mode reads'
        )
        self.truth = GroundTruthGauge(self, truth) if self.mode == 'oracle' else None
        self.tcp_offset = cfg.cell.gripper.tcp_offset
        self.cup_gap = cfg.cell.gripper.cup_gap
        self.params = GaugeParams(
            no_payload_kg=g.no_payload_kg,
            noise_sigma_n=max(cfg.cell.wrench.noise_force_n, 0.1),
        )
        self.kin = UR10eKinematics()
        # Weighing on the lift and zeroing on the move: the streams kept, the fits' noise model.
        history_s = declare(
            self,
            'history_s',
            8.0,
            'stream kept for weighing on the lift and zeroing on the move [s sim]',
        )
        self.motion = MotionGauge(
            LiftHistory(float(history_s)),
            self.kin,
            self.tcp_offset,
            self.cup_gap,
            MotionGaugeParams(
                force_sigma_n=max(cfg.cell.wrench.noise_force_n, 0.1),
                torque_sigma_nm=max(cfg.cell.wrench.noise_torque_nm, 0.004),
            ),
            g.lift_skip_s,
            self.samples,
        )
        self.history = self.motion.history
        # Only samples of the last `window_s` before the request's stamp count: the hold.
        self.window_s = float(
            declare(
                self,
                'window_s',
                self.samples / cfg.cell.wrench.rate_hz,
                'span of sim time averaged before the stamp asked for [s]',
            )
        )
        self.wait_s = float(
            declare(
                self, 'wait_s', 10.0, 'how long a request waits for the samples it needs [wall s]'
            )
        )
        self.q: np.ndarray | None = None
        self.qd_max = 0.0
        self.tare: np.ndarray | None = None
        # A new episode rewinds sim time: the buffer starts over, and the tare (taken on the
        # previous episode's gripper) is dropped until the director tares again.
        self.buffer = StampedBuffer(4 * self.samples, on_rewind=self._on_rewind)
        # Every sample counts (the reading averages the last N): reliable and deep enough for
        # two readings' worth of a burst (the world runs faster than real time), not the lossy
        # sensor profile. The services wait for samples the subscriptions deliver, so they run
        # in another callback group of a multi-threaded executor.
        stream = QoSProfile(
            depth=max(200, 2 * self.samples),
            history=HistoryPolicy.KEEP_LAST,
            reliability=ReliabilityPolicy.RELIABLE,
        )
        subs = MutuallyExclusiveCallbackGroup()
        self.create_subscription(WrenchStamped, topic, self.on_wrench, stream, callback_group=subs)
        self.create_subscription(
            JointState, 'joint_states', self.on_joints, stream, callback_group=subs
        )
        serve = MutuallyExclusiveCallbackGroup()
        self.create_service(Tare, '~/tare', self.on_tare, callback_group=serve)
        self.create_service(Weigh, '~/weigh', self.on_weigh, callback_group=serve)

    def _on_rewind(self, stamp: float) -> None:
        self.tare = None
        self.get_logger().info(f'sim time rewound to {stamp:.3f} s: new episode, tare dropped')

    def on_wrench(self, msg: WrenchStamped) -> None:
        f, t = msg.wrench.force, msg.wrench.torque
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        row = (f.x, f.y, f.z, t.x, t.y, t.z)
        self.buffer.add(stamp, row)
        self.history.add_wrench(stamp, row)

    def on_joints(self, msg: JointState) -> None:
        pos = dict(zip(msg.name, msg.position, strict=False))
        if all(j in pos for j in JOINTS):
            self.q = np.array([pos[j] for j in JOINTS])
            vel = dict(zip(msg.name, msg.velocity, strict=False))
            self.qd_max = max((abs(vel.get(j, 0.0)) for j in JOINTS), default=0.0)
            if all(j in vel for j in JOINTS):
                stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                qd = np.array([vel[j] for j in JOINTS])
                self.history.add_joints(stamp, self.q, qd)

    def _reading(self, min_stamp: Time) -> np.ndarray | str:
        want = min_stamp.sec + min_stamp.nanosec * 1e-9
        rows, newest = self.buffer.window(want, self.window_s, self.wait_s)
        if rows.shape[0] == 0 and not want - 1e-9 <= newest <= want + self.window_s + 1e-9:
            return (
                f'no wrench sample at sim time {want:.3f} s within {self.wait_s:.0f} s '
                f'(newest {newest:.3f} s)'
            )
        rows = rows[-self.samples :]
        if len(rows) < max(3, self.samples // 2):
            return (
                f'only {len(rows)} wrench samples in the {self.window_s:.2f} s before '
                f'{want:.3f} s: hold the arm still longer'
            )
        if self.qd_max > self.still_speed:
            return f'arm moving at {self.qd_max:.3f} rad/s > {self.still_speed} rad/s'
        try:
            return average_wrench(rows, self.params)
        except WeighError as exc:
            return str(exc)

    def on_tare(self, req: Tare.Request, res: Tare.Response) -> Tare.Response:
        if self.mode == 'oracle':  # nothing to zero: the oracle reads no sensor
            res.wrench = [0.0] * 6
            res.error_code = Tare.Response.OK
            return res
        if req.on_move:
            return self._zero_on_move(req, res)
        r = self._reading(req.min_stamp)
        if isinstance(r, str):
            res.error_code, res.error_msg = Tare.Response.NOT_STILL, r
            return res
        # The tare model holds at plumb poses only (core.gauge.off_plumb).
        why = off_plumb(self.kin, self.q, self.params)
        if why:
            res.error_code, res.error_msg = Tare.Response.NOT_STILL, why
            return res
        self.tare = r
        res.wrench = [float(v) for v in r]
        res.error_code = Tare.Response.OK
        return res

    def _streams_until(self, want: float) -> str:
        """Wait (wait_s) until the wrench and the joint states have reached sim time `want`
        [s]: '' once they have, else what is missing."""
        rows, _ = self.buffer.window(want, self.window_s, self.wait_s)
        if rows.shape[0] == 0 or not self.history.wait_joints(want, self.wait_s):
            return (
                f'no wrench and joint states at sim time {want:.3f} s within {self.wait_s:.0f} s'
            )
        return ''

    def _zero_on_move(self, req: Tare.Request, res: Tare.Response) -> Tare.Response:
        """The tare from the empty tool's move since req.moved_since (core.gauge_lift)."""
        want = req.min_stamp.sec + req.min_stamp.nanosec * 1e-9
        since = req.moved_since.sec + req.moved_since.nanosec * 1e-9
        missing = self._streams_until(want)
        if missing:
            res.error_code, res.error_msg = Tare.Response.NOT_CONVERGED, missing
            return res
        z = self.motion.zero(want, since, self.tare)
        if z.tare is None:
            res.error_code, res.error_msg = Tare.Response.NOT_CONVERGED, z.why
            return res
        self.tare = z.tare
        res.wrench = [float(v) for v in z.tare]
        res.error_code = Tare.Response.OK
        return res

    def on_weigh(self, req: Weigh.Request, res: Weigh.Response) -> Weigh.Response:
        if self.mode == 'oracle':
            observation = observation_from_msg(req.observation)
            spec = self.truth.spec(observation) if self.truth else 'no ground truth service'
            if isinstance(spec, str):
                res.error_code, res.error_msg = Weigh.Response.NO_PAYLOAD, spec
                return res
            res.spec, res.quality = spec_to_msg(spec), 'oracle'
            res.error_code = Weigh.Response.OK
            return res
        tare = np.array(req.tare, dtype=float) if req.has_tare else self.tare
        if tare is None:
            res.error_code, res.error_msg = (
                Weigh.Response.NO_TARE,
                'weigh before tare: call ~/tare with the gripper empty',
            )
            return res
        if req.on_lift:
            return self._weigh_on_lift(req, tare, res)
        r = self._reading(req.min_stamp)
        if isinstance(r, str):
            res.error_code, res.error_msg = Weigh.Response.NOT_STILL, r
            return res
        try:
            reading = weigh_held(
                tare,
                r,
                observation_from_msg(req.observation),
                self.q,
                kin=self.kin,
                tcp_offset=self.tcp_offset,
                cup_gap=self.cup_gap,
                params=self.params,
            )
        except WeighError as exc:
            res.error_code = (
                Weigh.Response.NO_PAYLOAD
                if exc.verdict == 'no_payload'
                else Weigh.Response.SLIPPED
            )
            res.error_msg = str(exc)
            return res
        res.spec = spec_to_msg(reading.spec)
        res.quality = reading.quality
        res.error_code = Weigh.Response.OK
        return res

    def _weigh_on_lift(
        self, req: Weigh.Request, tare: np.ndarray, res: Weigh.Response
    ) -> Weigh.Response:
        """The fit on the lift that ended at the request's stamp (core.gauge_lift)."""
        want = req.min_stamp.sec + req.min_stamp.nanosec * 1e-9
        missing = self._streams_until(want)
        if missing:
            res.error_code, res.error_msg = Weigh.Response.NOT_STILL, missing
            return res
        spec, why = self.motion.weigh(want, tare, observation_from_msg(req.observation))
        if spec is None:
            res.error_code, res.error_msg = Weigh.Response.NOT_CONVERGED, why
            return res
        res.spec = spec_to_msg(spec)
        res.quality = 'lift'
        res.error_code = Weigh.Response.OK
        return res


def main(args: list[str] | None = None) -> None:
    run_node(WristGaugeNode, args, threads=3)


if __name__ == '__main__':
    main()
