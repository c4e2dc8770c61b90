"""The cell bridge's streams: /clock, joint states, the wrist wrench and TF at the cell's time.

They publish after each call on the world and, while a goal or the hardware world steps it,
every few physics steps (`StepStream`): the clock, joint states and TF at 50 Hz of sim time,
the wrench at cell.yaml wrench.rate_hz; in the hardware profile the joint states at every step
(500 Hz), as a UR driver's joint_state_broadcaster does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped, WrenchStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_ros import StaticTransformBroadcaster, TransformBroadcaster

from palletizer.bridge import KINEMATICS_EVERY, FramePose, StepStream, cell_frames
from palletizer.sim.cell import Cell

__all__ = ['BURST', 'STREAM', 'TF', 'CellStreams', 'stamp']

# Reliable, like the UR driver's broadcasters: a reliable writer matches reliable and
# best-effort readers alike, and a 1.2 MB image survives fragmentation.
STREAM = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# The world advances in bursts (0.7 s of sim time can take 20 ms of wall time): the writer keeps
# enough history that a reliable reader gets every sample of a burst: the wrist gauge averages
# the last 600 wrench samples of a 1.5 s hold at 500 Hz; 1000 keeps 2 s.
BURST = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
TF = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


def stamp(t: float) -> Time:
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


class CellStreams:
    """The publishers of `cell`'s state on `node` and the step streams that drive them.

    truth: also the truth/<id> carton TFs; hardware: joint states stream at every step rather
    than with the clock; wrench_every: physics steps per wrench sample; publish_io: the UR
    driver's I/O states, published with the clock.
    """

    def __init__(
        self,
        node: Node,
        cell: Cell,
        joints: Sequence[str],
        wrench_topic: str,
        truth: bool,
        hardware: bool,
        wrench_every: int,
        publish_io: Callable[[], None],
    ) -> None:
        self.cell = cell
        self.joints = joints
        self.truth = truth
        self.hardware = hardware
        self.publish_io = publish_io
        self.clock_pub = node.create_publisher(Clock, '/clock', STREAM)
        self.js_pub = node.create_publisher(JointState, 'joint_states', BURST)
        self.wrench_pub = node.create_publisher(WrenchStamped, wrench_topic, BURST)
        self.tf_pub = TransformBroadcaster(node, qos=TF)
        self.tf_static_pub = StaticTransformBroadcaster(node)
        self.stream = StepStream(self.publish_kinematics, every=KINEMATICS_EVERY)
        # A UR driver's joint_state_broadcaster runs at 500 Hz: every step in the hardware profile.
        self.joint_stream = StepStream(self.publish_joints, every=1)
        # The wrench streams faster (cell.yaml wrench.rate_hz), as a UR driver's does: a
        # reading held still averages more samples in less time.
        self.wrench_stream = StepStream(self.publish_wrench, every=wrench_every)

    def attach(self) -> None:
        """Stream from the cell's physics steps again (after a reset)."""
        self.stream.attach(self.cell)
        self.wrench_stream.attach(self.cell)
        if self.hardware:
            self.joint_stream.attach(self.cell)

    def transforms(self, frames: Iterable[FramePose]) -> list[TransformStamped]:
        now = stamp(self.cell.time)
        out = []
        for f in frames:
            t = TransformStamped()
            t.header.stamp, t.header.frame_id, t.child_frame_id = now, f.parent, f.child
            tr, r = t.transform.translation, t.transform.rotation
            tr.x, tr.y, tr.z = (float(v) for v in f.pos)
            r.w, r.x, r.y, r.z = (float(v) for v in f.quat)
            out.append(t)
        return out

    def publish_static(self, frames: Iterable[FramePose]) -> None:
        self.tf_static_pub.sendTransform(self.transforms(frames))

    def publish_state(self) -> None:
        """Clock, joint states, wrench and TF at the current sim time."""
        self.publish_kinematics()
        self.publish_wrench()

    def publish_kinematics(self) -> None:
        """Clock, joint states (unless they stream on their own) and TF at the current sim time."""
        cell = self.cell
        self.clock_pub.publish(Clock(clock=stamp(cell.time)))
        if not self.hardware:
            self.publish_joints()
        self.tf_pub.sendTransform(self.transforms(cell_frames(cell, self.truth)))
        self.publish_io()

    def publish_joints(self) -> None:
        q, qd, tau = self.cell.joint_state()
        js = JointState(name=list(self.joints))
        js.header.stamp = stamp(self.cell.time)
        js.position, js.velocity, js.effort = q.tolist(), qd.tolist(), tau.tolist()
        self.js_pub.publish(js)

    def publish_wrench(self) -> None:
        """The wrist wrench at the current sim time, in tool0 (as the UR driver publishes it)."""
        w = self.cell.wrench()
        msg = WrenchStamped()
        msg.header.stamp, msg.header.frame_id = stamp(self.cell.time), 'tool0'
        f, t = msg.wrench.force, msg.wrench.torque
        f.x, f.y, f.z = (float(v) for v in w.force)
        t.x, t.y, t.z = (float(v) for v in w.torque)
        self.wrench_pub.publish(msg)
