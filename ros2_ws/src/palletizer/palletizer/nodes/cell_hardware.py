"""The cell bridge's hardware profile: a world that runs on, cameras that stream, a line on I/O.

In this profile the simulated cell offers the palletizer only what a real UR10e cell offers
(docs/real-cell.md "The hardware profile"). The world steps on its own thread at the configured
real-time factor whenever no trajectory goal is stepping it; the cameras publish every
1 / camera_rate_hz of simulated time, whoever steps the world, as realsense2_camera does
(16UC1 depth in millimetres); the line answers the palletizer's request output with a carton
and a photo-eye input (bridge/line.py). The simulated cell's own services still exist under
their names, but each answers NOT_OFFERED and is counted in `~/sim_only_calls`, so a palletizer
node that leans on one fails at once, by name, and the benchmark can say how often.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from palletizer_msgs.msg import Placement as PlacementMsg
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import UInt32

from palletizer.bridge import StepStream, camera_matrices, steps_per_sample
from palletizer.bridge.line import Line
from palletizer.bridge.pacer import Pacer
from palletizer.bridge.scenario import Scenario
from palletizer.core.config import HardwareConfig

__all__ = ['PROFILES', 'CameraPublisher', 'HardwareWorld', 'depth_image']

PROFILES = ('lockstep', 'hardware')

# Reliable, like the camera drivers' default: a 1.2 MB image survives fragmentation.
_IMAGES = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)
_PLACEMENTS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
_LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


def depth_image(depth_m: np.ndarray, encoding: str) -> tuple[bytes, int]:
    """(data, bytes per pixel) of a depth image [m]: 32FC1 in metres, or 16UC1 in millimetres
    as realsense2_camera publishes it (0 = no return, as for a missing or out-of-range depth)."""
    if encoding == '32FC1':
        return depth_m.astype(np.float32).tobytes(), 4
    mm = np.where(np.isfinite(depth_m) & (depth_m > 0), np.round(depth_m * 1000.0), 0.0)
    return np.clip(mm, 0, 65535).astype(np.uint16).tobytes(), 2


class CameraPublisher:
    """Depth, colour and CameraInfo of each camera under topic patterns with `{camera}`."""

    def __init__(
        self, node: Node, cameras: list[str], topics: Mapping[str, str], depth_encoding: str
    ) -> None:
        self.encoding = depth_encoding
        self.pubs = {
            n: tuple(
                node.create_publisher(kind, topics[key].format(camera=n), _IMAGES)
                for kind, key in ((Image, 'depth'), (Image, 'color'), (CameraInfo, 'info'))
            )
            for n in cameras
        }

    def publish(self, frames: Mapping[str, Any], stamp: Time) -> None:
        for n, fr in frames.items():
            # Cell.capture renders both images unless told otherwise
            assert fr.depth is not None and fr.rgb is not None, f'capture of {n}: no image'
            depth_pub, color_pub, info_pub = self.pubs[n]
            h, w = fr.depth.shape
            frame_id = f'{n}_optical'
            data, bpp = depth_image(fr.depth, self.encoding)
            dep = Image(height=h, width=w, encoding=self.encoding, step=w * bpp, data=data)
            col = Image(height=h, width=w, encoding='rgb8', step=w * 3, data=fr.rgb.tobytes())
            k, r, p = camera_matrices(fr.intrinsics)
            info = CameraInfo(height=h, width=w, distortion_model='plumb_bob', k=k, r=r, p=p)
            info.d = [0.0] * 5
            for msg in (dep, col, info):
                msg.header.stamp, msg.header.frame_id = stamp, frame_id
            depth_pub.publish(dep)
            color_pub.publish(col)
            info_pub.publish(info)


class HardwareWorld:
    """The running world of the hardware profile around one cell bridge.

    `lock` is the bridge's world lock; `stepping_goal()` says a trajectory goal is stepping the
    world (the world thread then leaves it to the goal); `render(names)` returns the frames of
    the named cameras now; `stamp()` the sim time as a message stamp.
    """

    def __init__(
        self,
        node: Node,
        cfg: HardwareConfig,
        *,
        lock: threading.Lock,
        stepping_goal: Callable[[], bool],
        render: Callable[[list[str]], Mapping[str, Any]],
        stamp: Callable[[], Time],
        cameras: CameraPublisher,
        rtf: float,
        camera_rate_hz: float,
        scenario: Scenario,
        reset_world: Callable[[int], None],
    ) -> None:
        self.node, self.lock, self.stepping_goal = node, lock, stepping_goal
        self.scenario, self.reset_world = scenario, reset_world
        self._exchange = False  # a pallet was taken: lay out the next once finished drops
        # The palletizer's published placements: the plan and its own check, for the referee.
        node.create_subscription(
            PlacementMsg, '/palletizer/placements', self._on_placement, _PLACEMENTS
        )
        self.render, self.stamp, self.cameras = render, stamp, cameras
        self.pacer = Pacer(rtf)
        self.camera_rate_hz = float(camera_rate_hz)
        self.line = Line(cfg.line)
        self.frames = StepStream(self._stream_frames, every=1)
        self.sim_only_calls = 0
        self._count_pub = node.create_publisher(UInt32, '~/sim_only_calls', _LATCHED)
        self._count_pub.publish(UInt32(data=0))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cell: Any = None

    def attach(self, cell: Any) -> None:
        """After every Cell.reset: pace it, stream its cameras, an empty station."""
        self.cell = cell
        self.pacer.attach(cell)
        self.frames.every = steps_per_sample(self.camera_rate_hz, float(cell.dt))
        self.frames.attach(cell)
        self.line.reset()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name='cell_world', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        # Printed, not logged: the node's context is down by now. The benchmark reads it.
        print(f'sim-only calls: {self.sim_only_calls}', flush=True)

    def refuse(self, name: str, response: Any) -> Any:
        """The answer of a simulated-cell service in this profile: NOT_OFFERED, counted."""
        self.sim_only_calls += 1
        self._count_pub.publish(UInt32(data=self.sim_only_calls))
        why = (
            f'{name} is not offered: the cell runs the hardware profile, which offers only '
            f'what a real UR10e cell has (docs/real-cell.md); call {self.sim_only_calls}'
        )
        self.node.get_logger().warning(why)
        response.error_code = response.NOT_OFFERED
        response.error_msg = why
        if hasattr(response, 'stamp'):
            response.stamp = self.stamp()
        return response

    def _on_placement(self, msg: PlacementMsg) -> None:
        pose = lambda p: (p.x, p.y, p.z, p.yaw)  # noqa: E731
        self.scenario.note_placement(msg.package_id, pose(msg.planned_pose), pose(msg.actual_pose))

    def _exchange_pallet(self) -> bool:
        """The plant's side of the pallet exchange (bridge/scenario.py); True when it acted."""
        line = self.line
        if line.finished and line.ready:  # take the pallet away and score it
            line.ready = False
            out = self.scenario.score(self.cell.ground_truth(), line.handed, self.sim_only_calls)
            print(
                f'scenario: level {out["level"]} seed {out["seed"]}: '
                f'{out["within_tolerance"]}/{out["handed_over"]} within tolerance by the referee',
                flush=True,
            )
            self._exchange = True
            return True
        if self._exchange and not line.finished:  # lay out the next load on an empty pallet
            self._exchange = False
            self.reset_world(self.scenario.next_seed())
            return True
        return False

    def _stream_frames(self) -> None:
        names = list(self.cameras.pubs)
        self.cameras.publish(self.render(names), self.stamp())

    def _run(self) -> None:
        """Step the world 20 ms of sim time at a time while no goal steps it; between steps,
        let the line act. The pacer's hook holds the pace."""
        while not self._stop.is_set():
            if self.stepping_goal() or not self.lock.acquire(timeout=0.05):
                self._stop.wait(0.005)
                continue
            try:
                if self.cell is not None:
                    if not self._exchange_pallet():
                        self.line.tick(self.cell)
                    self.cell.step(10)
            except Exception as exc:
                if not self.node.context.ok():
                    return  # a stop: the publishers went down under a step's stream
                self.node.get_logger().error(f'the hardware world stopped: {exc!r}')
                raise  # the world must not die silently
            finally:
                self.lock.release()
