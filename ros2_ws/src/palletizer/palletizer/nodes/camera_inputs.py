"""Camera topics as perception reads them: depth, colour, CameraInfo and the optical frames (a
tf2_ros Buffer fed by a TransformListener, as a calibrated cell publishes them on /tf_static),
gathered into core CameraViews of one capture stamp."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Transform
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.time import Time as RosTime
from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2, PointField
from tf2_ros import Buffer, TransformListener

from palletizer.core.errors import InvalidValue
from palletizer.core.views import CameraView
from palletizer.nodes.convert import stamp_s
from palletizer.nodes.qos import COMMANDS, STATIC_TF

__all__ = [
    'DEFAULT_TOPICS',
    'CameraInputs',
    'cloud_msg',
    'image_to_array',
    'transform_to_matrix',
]


# The cameras' topics, `{camera}` standing for a camera's name (cell.yaml cameras).
DEFAULT_TOPICS = {
    'depth': '/cameras/{camera}/depth/image_raw',
    'color': '/cameras/{camera}/color/image_raw',
    'info': '/cameras/{camera}/camera_info',
}


def image_to_array(msg: Image) -> np.ndarray:
    """32FC1 depth [m] -> (H, W) float32; 16UC1 depth [mm] -> metres; rgb8 -> (H, W, 3) uint8."""
    h, w = int(msg.height), int(msg.width)
    if msg.encoding == '32FC1':
        depth: np.ndarray = np.frombuffer(bytes(msg.data), dtype=np.float32).reshape(h, w).copy()
        return depth
    if msg.encoding == '16UC1':
        return (
            np.frombuffer(bytes(msg.data), dtype=np.uint16).reshape(h, w).astype(np.float32) / 1000
        )
    if msg.encoding in ('rgb8', 'bgr8'):
        img: np.ndarray = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(h, w, 3).copy()
        rgb: np.ndarray = img[..., ::-1].copy() if msg.encoding == 'bgr8' else img
        return rgb
    raise InvalidValue(f'image encoding {msg.encoding!r}; expected 32FC1, 16UC1, rgb8 or bgr8')


def transform_to_matrix(tr: Transform) -> np.ndarray:
    """geometry_msgs/Transform -> (4, 4)."""
    q = tr.rotation
    x, y, z, w = q.x, q.y, q.z, q.w
    R = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = (tr.translation.x, tr.translation.y, tr.translation.z)
    return T


def cloud_msg(points: np.ndarray, stamp: Time, frame_id: str = 'world') -> PointCloud2:
    """(N, 3) float32 points [m] -> an unorganised sensor_msgs/PointCloud2 (x, y, z float32)."""
    pts = np.ascontiguousarray(points, dtype=np.float32).reshape(-1, 3)
    msg = PointCloud2()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.height, msg.width = 1, int(pts.shape[0])
    msg.fields = [
        PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
        for i, n in enumerate('xyz')
    ]
    msg.is_bigendian, msg.point_step, msg.row_step = False, 12, 12 * int(pts.shape[0])
    msg.is_dense = True
    msg.data = pts.tobytes()
    return msg


class CameraInputs:
    """Latest depth, colour and CameraInfo per camera, the optical frames, and joint states.

    `views(names, stamp)` waits until every named camera has a depth (and, with rgb, a colour)
    image and CameraInfo of that exact stamp, and returns them as CameraViews (a capture on
    request); `streamed(names, min_stamp)` takes each camera's first complete frame stamped at
    or after min_stamp (streaming cameras). `topics` maps depth, color and info to topic
    patterns with `{camera}` (DEFAULT_TOPICS), so a camera driver's own names can be used.
    """

    def __init__(
        self,
        node: Node,
        cameras: Sequence[str],
        group: CallbackGroup | None = None,
        topics: Mapping[str, str] | None = None,
    ) -> None:
        topics = {**DEFAULT_TOPICS, **(topics or {})}
        self._lock = threading.Condition()
        self._depth: dict[str, Image] = {}
        self._color: dict[str, Image] = {}
        self._info: dict[str, CameraInfo] = {}
        # The optical frames: a lookup world-><camera>_optical. The buffer takes the node for its
        # clock, so a rewound sim time (a new episode) clears the dynamic frames; static ones stay.
        self._tf = Buffer(node=node)
        self._tf_listener = TransformListener(self._tf, node, static_qos=STATIC_TF)
        self._joints: list[tuple[int, JointState]] = []  # (arrival number, state)
        self._arrived = 0  # messages so far: mark() tells later ones from earlier ones
        self._when: dict[tuple[int, str], int] = {}
        for n in cameras:
            for kind, key, store in (
                (Image, 'depth', self._depth),
                (Image, 'color', self._color),
                (CameraInfo, 'info', self._info),
            ):
                node.create_subscription(
                    kind,
                    topics[key].format(camera=n),
                    self._put(store, n),
                    COMMANDS,
                    callback_group=group,
                )
        node.create_subscription(
            JointState, 'joint_states', self._on_joints, COMMANDS, callback_group=group
        )

    def _put(
        self, store: dict[str, Image] | dict[str, CameraInfo], name: str
    ) -> Callable[[Image | CameraInfo], None]:
        def cb(msg: Image | CameraInfo) -> None:
            with self._lock:
                self._arrived += 1
                store[name] = msg
                self._when[id(store), name] = self._arrived
                self._lock.notify_all()

        return cb

    def optical_frame(self, name: str) -> np.ndarray | None:
        """T_world_optical (4, 4) of camera `name` from the tf2 buffer, or None before its frame
        arrived."""
        frame = f'{name}_optical'
        if not self._tf.can_transform('world', frame, RosTime()):
            return None
        return transform_to_matrix(self._tf.lookup_transform('world', frame, RosTime()).transform)

    def _on_joints(self, msg: JointState) -> None:
        with self._lock:
            last = self._joints[-1][1] if self._joints else None
            if last is not None and stamp_s(msg.header.stamp) < stamp_s(last.header.stamp):
                self._joints = []  # sim time rewound: a new episode, the old states are stale
            self._arrived += 1
            self._joints = [*self._joints[-49:], (self._arrived, msg)]
            self._lock.notify_all()

    def mark(self) -> int:
        """How many messages have arrived: views and joints_at(after=mark) take later ones."""
        with self._lock:
            return self._arrived

    def _ready(
        self, names: Sequence[str], stamp: float, rgb: bool, after: int, at_least: bool = False
    ) -> bool:
        """Every named camera has its images and info of `stamp` (or, `at_least`, of one stamp
        no earlier than it) that arrived after `after`, and its optical frame."""
        for n in names:
            need = [self._depth, self._info] + ([self._color] if rgb else [])
            if any(n not in d or self._when[id(d), n] <= after for d in need):
                return False
            own = stamp_s(self._depth[n].header.stamp)
            if any(abs(stamp_s(d[n].header.stamp) - own) > 1e-6 for d in need):
                return False  # the images of one frame are still arriving
            if own < stamp - 1e-6 if at_least else abs(own - stamp) > 1e-6:
                return False
        return all(self._tf.can_transform('world', f'{n}_optical', RosTime()) for n in names)

    def streamed(
        self,
        names: Sequence[str],
        min_stamp: float,
        rgb: bool,
        after: int = 0,
        timeout: float = 10.0,
    ) -> tuple[list[CameraView], float] | None:
        """(CameraViews, stamp) of each camera's first whole frame stamped at or after
        `min_stamp` [s] that arrived after mark() returned `after`; the stamp is the latest of
        theirs. None when they did not all arrive within `timeout` [s, wall]."""
        end = time.monotonic() + timeout
        with self._lock:
            while not self._ready(names, min_stamp, rgb, after, at_least=True):
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(min(left, 0.02))
            out = self._gather(names, rgb)
            return None if out is None else (out, max(v.stamp for v in out))

    def views(
        self, names: Sequence[str], stamp: float, rgb: bool, after: int = 0, timeout: float = 10.0
    ) -> list[CameraView] | None:
        """CameraViews of capture `stamp` [s] that arrived after mark() returned `after` (an
        earlier episode had captures at the same sim times), or None when they did not all
        arrive in time."""
        end = time.monotonic() + timeout
        with self._lock:
            while not self._ready(names, stamp, rgb, after):
                left = end - time.monotonic()
                if left <= 0:
                    return None
                # The tf2 listener's callbacks do not notify this condition: look again soon.
                self._lock.wait(min(left, 0.02))
            return self._gather(names, rgb)

    def _gather(self, names: Sequence[str], rgb: bool) -> list[CameraView] | None:
        """The CameraViews of the frames held now (under the lock, once _ready held)."""
        out = []
        for n in names:
            info = self._info[n]
            K = np.asarray(info.k, dtype=float).reshape(3, 3)
            col = image_to_array(self._color[n]) if rgb else None
            dep = image_to_array(self._depth[n])
            T = self.optical_frame(n)
            if T is None:  # cannot happen once _ready held: static frames are never dropped
                return None
            out.append(CameraView(n, dep, col, K, T, stamp_s(self._depth[n].header.stamp)))
        return out

    def joints_at(
        self, stamp: float, names: Sequence[str], after: int = 0, timeout: float = 5.0
    ) -> np.ndarray | None:
        """Joint positions (in `names` order) of the first state stamped at or after `stamp`
        that arrived after mark() returned `after`: in fast-forward the arm jumps without
        sim time passing, so a state stamped like the capture may still be from before it."""
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                fresh = [
                    j
                    for n, j in self._joints
                    if n > after and stamp_s(j.header.stamp) >= stamp - 1e-9
                ]
                if fresh:
                    js = fresh[0]
                    pos = dict(zip(js.name, js.position, strict=False))
                    if all(n in pos for n in names):
                        return np.array([pos[n] for n in names], dtype=float)
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(left)
