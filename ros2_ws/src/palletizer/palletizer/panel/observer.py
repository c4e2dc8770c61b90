"""The panel's window on a running graph: an rclpy node in the run's own DDS domain.

It subscribes to what the run publishes, as RViz or Foxglove would, and keeps what the live view
draws:
- /palletizer/episode_events, /palletizer/placements, /palletizer/pallet_states: the episode's
  records (the same ones telemetry writes to disk), fed to an `EpisodeScene`;
- /palletizer/heightmap: the last fused height map, with its unobserved cells;
- /palletizer/detection and the pick camera's colour frame, CameraInfo and optical frame on
  /tf_static: the station camera's latest frame with the detected carton's box drawn on it;
- /robot_description, its root link's pose on /tf_static and /joint_states: the robot, which the
  page builds from the URDF's links, joints and visuals and moves with the joint positions.

Nothing here reads simulator truth: the true centre of mass is the referee's
(/palletizer/pallet_states), as the run reports it.
"""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
import rclpy
from palletizer_msgs.msg import EpisodeEvent, HeightMap, Observation, PalletState, Placement
from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from palletizer.core.config import load_config
from palletizer.core.contracts import PalletGeometry
from palletizer.nodes.camera_inputs import image_to_array, transform_to_matrix
from palletizer.nodes.qos import COMMANDS, EVENTS, LATCHED, SENSORS, STATIC_TF
from palletizer.panel.scene import EpisodeScene

__all__ = ['LiveState', 'Observer', 'draw_detection', 'pick_camera', 'urdf_root']


def pick_camera(level: int) -> str:
    """The camera whose frames the detector reads at this level's pick (the first of them)."""
    cfg = load_config()
    det = cfg.perception.detector
    if cfg.level(level).source == 'truck':
        return str(det.truck_cameras[0])
    return str(det.camera)


def urdf_root(text: str) -> str | None:
    """The URDF's root link (the one link that is no joint's child), or None when the text is
    not a URDF with exactly one root."""
    try:
        robot = ET.fromstring(text)
    except ET.ParseError:
        return None
    links = [str(link.get('name')) for link in robot.findall('link')]
    children = {str(c.get('link')) for c in robot.findall('joint/child')}
    roots = [name for name in links if name not in children]
    return roots[0] if len(roots) == 1 else None


def _pose(p) -> dict[str, float]:
    return {'x': p.x, 'y': p.y, 'z': p.z, 'yaw': p.yaw}


def placement_record(p: Placement) -> dict[str, Any]:
    return {
        'seq': int(p.seq),
        'package_id': p.package_id,
        'package_type': p.package_type,
        'mass_kg': p.mass_kg,
        'dims_m': [float(v) for v in p.dims_m],
        'layer': int(p.layer),
        'planned_pose': _pose(p.planned_pose),
        'actual_pose': _pose(p.actual_pose),
        'error_xy_m': p.error_xy_m,
        'support_ratio': p.support_ratio,
        'placed': bool(p.placed),
    }


def state_record(s: PalletState) -> dict[str, Any]:
    return {
        'after_seq': int(s.after_seq),
        'cog_x': s.cog.x,
        'cog_y': s.cog.y,
        'cog_z': s.cog.z,
        'stability_margin_m': s.stability_margin_m,
    }


def draw_detection(
    rgb: np.ndarray, K: np.ndarray, T_world_optical: np.ndarray, det: dict[str, Any] | None
) -> np.ndarray:
    """The frame with the detected carton's box (world frame) drawn on it: the top face in
    green, the vertical edges and bottom face thinner."""
    img = np.ascontiguousarray(rgb[..., ::-1])  # OpenCV draws in BGR
    if det is None:
        return img
    L, W, H = det['dims']
    c, s = np.cos(det['yaw']), np.sin(det['yaw'])
    local = np.array([[-L, -W], [L, -W], [L, W], [-L, W]]) / 2.0
    xy = local @ np.array([[c, s], [-s, c]]) + np.array([det['x'], det['y']])
    T_inv = np.linalg.inv(T_world_optical)
    faces = []
    for z in (det['z'] + H / 2.0, det['z'] - H / 2.0):
        pts = np.c_[xy, np.full(4, z), np.ones(4)] @ T_inv.T
        if np.any(pts[:, 2] <= 1e-3):
            return img  # behind the camera: nothing sensible to draw
        uv = (pts[:, :3] / pts[:, 2:3]) @ K.T
        faces.append(np.round(uv[:, :2]).astype(np.int32))
    top, bottom = faces
    cv2.polylines(img, [bottom], True, (40, 160, 40), 1, cv2.LINE_AA)
    for a, b in zip(top, bottom, strict=True):
        cv2.line(img, tuple(int(v) for v in a), tuple(int(v) for v in b), (40, 160, 40), 1)
    cv2.polylines(img, [top], True, (0, 255, 0), 2, cv2.LINE_AA)
    return img


class LiveState:
    """What the live view shows, updated from the observer's callbacks (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pallet = PalletGeometry()
        self.scene = EpisodeScene()
        self.episode: tuple[str, int] | None = None
        self.heightmap: dict[str, Any] | None = None
        self.detection: dict[str, Any] | None = None
        self.camera_png: bytes | None = None
        self.camera_seq = 0
        self.version = 0  # bumped on every change; the server pushes when it moves
        # The robot: the URDF, its root link's pose in the pallet frame (row-major 4x4, [m]),
        # and the latest joint positions ([rad] or [m]), each with its own version so that a
        # joint update pushes only the joints.
        self.robot_urdf: str | None = None
        self.robot_origin: list[float] | None = None
        self.robot_version = 0
        self.joints: dict[str, float] = {}
        self.joints_version = 0

    def reset(self) -> None:
        """Forget the last run's scene, map and frame (a new run starts)."""
        with self.lock:
            self.scene = EpisodeScene()
            self.episode = None
            self.heightmap = self.detection = self.camera_png = None
            self.camera_seq = 0
            self.version += 1
            self.robot_urdf = self.robot_origin = None
            self.joints = {}
            self.robot_version += 1
            self.joints_version += 1

    def _episode(self, run_id: str, seed: int) -> None:
        if self.episode != (run_id, seed):
            self.episode = (run_id, seed)
            self.scene = EpisodeScene(seed=seed)
            self.heightmap = None

    def on_event(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self._episode(rec['run_id'], rec['seed'])
            self.scene.on_event(rec)
            self.version += 1

    def on_placement(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self.scene.on_placement(rec)
            self.version += 1

    def on_state(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self.scene.on_state(rec)
            self.version += 1

    def on_heightmap(self, h: HeightMap) -> None:
        ox, oy = self.pallet.centre_xy
        with self.lock:
            self.heightmap = {
                'nx': int(h.nx),
                'ny': int(h.ny),
                'cell': float(h.cell_size),
                'origin': [round(h.origin_x - ox, 4), round(h.origin_y - oy, 4)],
                'cells': [round(float(v), 4) for v in h.cells],
                'observed': [bool(v) for v in h.observed],
            }
            self.version += 1

    def on_camera(self, png: bytes, det: dict[str, Any] | None) -> None:
        with self.lock:
            self.camera_png, self.detection = png, det
            self.camera_seq += 1
            self.version += 1

    def on_robot_description(self, text: str) -> None:
        with self.lock:
            self.robot_urdf = text
            self.robot_version += 1

    def on_robot_origin(self, T_world_root: np.ndarray) -> None:
        """The URDF root's pose in the world (4x4 [m]), kept in the pallet frame of the scene
        (origin at the deck centre, z up from the deck top)."""
        ox, oy = self.pallet.centre_xy
        T = np.array(T_world_root, dtype=float)
        T[:3, 3] -= (ox, oy, self.pallet.deck_z)
        with self.lock:
            self.robot_origin = [round(float(v), 6) for v in T.reshape(-1)]
            self.robot_version += 1

    def on_joints(self, names: Sequence[str], positions: Sequence[float]) -> None:
        with self.lock:
            for name, q in zip(names, positions, strict=False):
                self.joints[name] = round(float(q), 6)
            self.joints_version += 1

    def robot(self) -> dict[str, Any]:
        """What the page needs to draw the robot: {urdf, origin, joints}."""
        with self.lock:
            return {
                'urdf': self.robot_urdf,
                'origin': self.robot_origin,
                'joints': dict(self.joints),
            }

    def joint_positions(self) -> dict[str, float]:
        with self.lock:
            return dict(self.joints)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                'scene': self.scene.scene(),
                'rows': self.scene.rows(),
                'heightmap': self.heightmap,
                'camera_seq': self.camera_seq,
                'detection': self.detection,
            }


class Observer:
    """Spins a node in `domain_id` on its own thread until close()."""

    def __init__(self, domain_id: int, level: int, live: LiveState) -> None:
        self.live = live
        self.camera = pick_camera(level)
        self.context = Context()
        rclpy.init(context=self.context, domain_id=int(domain_id))
        self.node = Node('panel_observer', context=self.context)
        self._frame: Image | None = None
        self._info: CameraInfo | None = None
        self._optical: np.ndarray | None = None
        self._det: dict[str, Any] | None = None
        self._root: str | None = None  # the URDF's root link
        self._from_world: dict[str, np.ndarray] = {}  # static frames under world
        n, cam = self.node, self.camera
        n.create_subscription(EpisodeEvent, '/palletizer/episode_events', self._on_event, EVENTS)
        n.create_subscription(Placement, '/palletizer/placements', self._on_placement, EVENTS)
        n.create_subscription(PalletState, '/palletizer/pallet_states', self._on_state, EVENTS)
        n.create_subscription(HeightMap, '/palletizer/heightmap', live.on_heightmap, LATCHED)
        n.create_subscription(Observation, '/palletizer/detection', self._on_detection, LATCHED)
        n.create_subscription(Image, f'/cameras/{cam}/color/image_raw', self._on_frame, COMMANDS)
        n.create_subscription(CameraInfo, f'/cameras/{cam}/camera_info', self._on_info, COMMANDS)
        n.create_subscription(TFMessage, '/tf_static', self._on_tf, STATIC_TF)
        n.create_subscription(String, '/robot_description', self._on_description, LATCHED)
        n.create_subscription(JointState, '/joint_states', self._on_joints, SENSORS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, name='panel-observer', daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except (ExternalShutdownException, rclpy.executors.ShutdownException):
            pass

    def _on_event(self, ev: EpisodeEvent) -> None:
        try:
            payload = json.loads(ev.payload_json or '{}')
        except json.JSONDecodeError:
            payload = {}
        rec = {
            'run_id': ev.run_id,
            'seed': int(ev.seed),
            'seq': int(ev.seq),
            'ts': float(ev.ts),
            'kind': ev.kind,
            'package_id': ev.package_id,
            'payload': payload,
        }
        self.live.on_event(rec)

    def _on_placement(self, p: Placement) -> None:
        self.live.on_placement(placement_record(p))

    def _on_state(self, s: PalletState) -> None:
        self.live.on_state(state_record(s))

    def _on_tf(self, msg: TFMessage) -> None:
        for t in msg.transforms:
            if t.child_frame_id == f'{self.camera}_optical':
                self._optical = transform_to_matrix(t.transform)
            if t.header.frame_id.lstrip('/') == 'world':
                child = t.child_frame_id.lstrip('/')
                self._from_world[child] = transform_to_matrix(t.transform)
                if child == self._root:
                    self.live.on_robot_origin(self._from_world[child])

    def _on_description(self, msg: String) -> None:
        self._root = urdf_root(msg.data)
        self.live.on_robot_description(msg.data)
        if self._root in self._from_world:
            self.live.on_robot_origin(self._from_world[self._root])

    def _on_joints(self, msg: JointState) -> None:
        self.live.on_joints(list(msg.name), list(msg.position))

    def _on_info(self, info: CameraInfo) -> None:
        self._info = info

    def _on_detection(self, o: Observation) -> None:
        self._det = {
            'x': o.position.x,
            'y': o.position.y,
            'z': o.position.z,
            'yaw': o.yaw,
            'dims': [float(v) for v in o.dims_guess],
        }
        self._render()

    def _on_frame(self, img: Image) -> None:
        self._frame = img
        self._render()

    def _render(self) -> None:
        """Draw the newest detection on the newest frame (the detection follows its frames)."""
        if self._frame is None:
            return
        rgb = image_to_array(self._frame)
        if rgb.ndim != 3:
            return
        det = self._det
        if self._info is not None and self._optical is not None:
            K = np.asarray(self._info.k, dtype=float).reshape(3, 3)
            bgr = draw_detection(rgb, K, self._optical, det)
        else:
            bgr, det = np.ascontiguousarray(rgb[..., ::-1]), None
        ok, buf = cv2.imencode('.png', bgr)
        if ok:
            self.live.on_camera(buf.tobytes(), det)

    def close(self) -> None:
        try:
            self.executor.shutdown(timeout_sec=1.0)
        finally:
            self.node.destroy_node()
            rclpy.try_shutdown(context=self.context)
            self.thread.join(timeout=2.0)
