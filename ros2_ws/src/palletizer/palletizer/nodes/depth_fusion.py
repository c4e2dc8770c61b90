"""Depth-fusion node: the pallet height map and carton detection at the pick, from the cameras.

Parameters `map` and `detector` are each `cameras` (the default: depth images, CameraInfo and
the optical frames on /tf_static, fused and detected by palletizer.core) or `oracle` (the cell's
ground truth: the director reads these parameters and flags the run). With cameras, the node
asks the cell for a capture (`capture_service`, the simulated cell's; empty where the cameras
stream on their own) and waits for the frames of that capture's stamp.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from palletizer_msgs.msg import HeightMap as HeightMapMsg
from palletizer_msgs.msg import Observation as ObservationMsg
from palletizer_msgs.srv import (
    Capture,
    Detect,
    FuseHeightMap,
    GroundTruth,
    MeasureHeld,
    MeasureLid,
)
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.node import Node
from sensor_msgs.msg import PointCloud2

from palletizer.core.config import load_config
from palletizer.core.contracts import Observation, PalletGeometry
from palletizer.core.detection import (
    detect_station,
    detect_truck,
    held_height,
    measure_lid,
    remeasured,
)
from palletizer.core.fusion import stamp_heightmap, yaw_of_quat
from palletizer.core.heightmap_fusion import (
    MapMemory,
    RobotBody,
    fuse_heightmap,
)
from palletizer.core.views import CameraView
from palletizer.core.vocab import PerceptionMode
from palletizer.nodes.camera_inputs import DEFAULT_TOPICS, CameraInputs, cloud_msg
from palletizer.nodes.convert import (
    heightmap_to_msg,
    observation_from_msg,
    observation_to_msg,
    stamp_s,
)
from palletizer.nodes.params import declare
from palletizer.nodes.qos import LATCHED
from palletizer.nodes.spin import run_node

__all__ = ['DepthFusionNode', 'main']

MODES = PerceptionMode.names()


# A true carton: package_id, centre (3,) [m], orientation quaternion (w, x, y, z), L, W, H [m].
_TrueBox = tuple[
    str, tuple[float, float, float], tuple[float, float, float, float], tuple[float, float, float]
]


def _truth_boxes(res: GroundTruth.Response) -> Iterator[_TrueBox]:
    for c in res.cartons:
        p, o = c.pose.position, c.pose.orientation
        yield c.package_id, (p.x, p.y, p.z), (o.w, o.x, o.y, o.z), tuple(c.dims_m)


class DepthFusionNode(Node):
    def __init__(self) -> None:
        super().__init__('depth_fusion')

        self.map_mode = declare(
            self,
            'map',
            'cameras',
            'cameras | oracle (ground truth: flags the run)',
            read_only=True,
        )
        self.detector_mode = declare(
            self,
            'detector',
            'cameras',
            'cameras | oracle (ground truth: flags the run)',
            read_only=True,
        )
        for name, value in (('map', self.map_mode), ('detector', self.detector_mode)):
            if value not in MODES:
                raise SystemExit(
                    f'depth_fusion: {name}:={value!r}; expected one of {", ".join(MODES)}'
                )
        level = int(
            declare(
                self,
                'level',
                0,
                'level id: its source chooses the pick cameras; 0 = default',
                read_only=True,
            )
        )
        truth = declare(
            self,
            'ground_truth_service',
            '/cell_bridge/ground_truth',
            'the oracle reads it',
            read_only=True,
        )
        capture = declare(
            self,
            'capture_service',
            '/cell_bridge/capture',
            'asks the cell for frames; empty = streamed',
            read_only=True,
        )
        self.frames_timeout_s = float(
            declare(
                self,
                'frames_timeout_s',
                10.0,
                'wait for the frames of one capture [s, wall]',
                read_only=True,
            )
        )
        topics = {
            k: declare(
                self,
                f'{k}_topic',
                v,
                f'{k} topic pattern; {{camera}} stands for the camera',
                read_only=True,
            )
            for k, v in DEFAULT_TOPICS.items()
        }
        cfg = load_config()
        self.source = cfg.level(level or cfg.default_level).source
        hm = cfg.perception.heightmap
        self.fusion = hm.fusion
        self.pallet_cams = self.fusion.cameras
        self.body = RobotBody.from_config(cfg.cell) if hm.exclude_robot else None
        self.joint_names = cfg.cell.robot.joint_names
        self.det = cfg.perception.detector
        self.pick_cams = (
            tuple(self.det.truck_cameras) if self.source == 'truck' else (self.det.camera,)
        )
        held_cams = tuple(self.det.held_cameras) if self.source == 'truck' else ()
        if self.source == 'table':
            t = cfg.cell.tables.pick
            self.station, self.surface_z = t.centre, t.top
        else:
            c = cfg.cell.conveyor
            self.station, self.surface_z = c.station, c.top
        self.truck = cfg.cell.truck
        self.held_body = RobotBody.from_config(cfg.cell)
        self.tcp_offset = cfg.cell.gripper.tcp_offset
        self.cup_gap = cfg.cell.gripper.cup_gap
        self.pallet = PalletGeometry.from_config(cfg.cell.pallet)
        # Service callbacks wait on the cell's services and on camera topics: they run in their
        # own group while responses and frames arrive on the executor's other threads.
        self.serve_group = MutuallyExclusiveCallbackGroup()
        self.client_group = ReentrantCallbackGroup()
        # Ground truth for the oracle modes only: a real cell has none (docs/real-cell.md).
        oracle = 'oracle' in (self.map_mode, self.detector_mode)
        self.truth = (
            self.create_client(GroundTruth, truth, callback_group=self.client_group)
            if oracle
            else None
        )
        self.capture = (
            self.create_client(Capture, capture, callback_group=self.client_group)
            if capture
            else None
        )
        self.inputs = CameraInputs(
            self,
            tuple(
                dict.fromkeys(self.pallet_cams + self.pick_cams + held_cams + self.det.lid_cameras)
            ),
            group=self.client_group,
            topics=topics,
        )
        self.held: Observation | None = None
        self.memory = MapMemory(self.fusion, self.pallet)  # what this episode's fusions saw
        self.mark = 0
        self.capture_q: np.ndarray | None = None
        self.pub = self.create_publisher(HeightMapMsg, 'heightmap', LATCHED)
        self.cloud_pub = self.create_publisher(PointCloud2, 'points', LATCHED)
        # The carton each camera detection chose (world frame), for the panel and RViz users.
        self.detection_pub = self.create_publisher(ObservationMsg, 'detection', LATCHED)
        self.create_service(FuseHeightMap, '~/fuse', self.on_fuse, callback_group=self.serve_group)
        self.create_service(Detect, '~/detect', self.on_detect, callback_group=self.serve_group)
        self.create_service(
            MeasureHeld, '~/measure_held', self.on_measure_held, callback_group=self.serve_group
        )
        self.create_service(
            MeasureLid, '~/measure_lid', self.on_measure_lid, callback_group=self.serve_group
        )

    # Calls ----------------------------------------------------------------------------------
    def _call(self, client: Client | None, request: Any, timeout: float = 30.0) -> Any:
        if client is None or not client.wait_for_service(timeout_sec=10.0):
            return None
        done = threading.Event()
        fut = client.call_async(request)
        fut.add_done_callback(lambda _f: done.set())
        done.wait(timeout=timeout)
        return fut.result() if fut.done() else None

    def _views(
        self, names: Sequence[str], rgb: bool, min_stamp: float
    ) -> tuple[list[CameraView], float] | str:
        """(views, stamp) of a fresh capture of `names`, or why there is none; self.mark is the
        message count before the capture was asked for, self.capture_q the arm's joints at the
        capture (from the capture's answer; None without a capture service)."""
        self.mark = self.inputs.mark()
        self.capture_q = None
        if self.capture is not None:
            res = self._call(self.capture, Capture.Request(cameras=list(names)))
            if res is None or res.error_code != Capture.Response.OK:
                return 'no capture: ' + ('no answer' if res is None else res.error_msg)
            stamp = stamp_s(res.stamp)
            pos = dict(zip(res.joint_names, res.joint_positions, strict=False))
            if all(n in pos for n in self.joint_names):
                self.capture_q = np.array([pos[n] for n in self.joint_names], dtype=float)
        else:
            got = self.inputs.streamed(names, min_stamp, rgb, self.mark, self.frames_timeout_s)
            if got is None:
                return (
                    f'no frames of {", ".join(names)} stamped at or after {min_stamp:.3f} s '
                    f'within {self.frames_timeout_s} s'
                )
            return got
        if stamp < min_stamp - 1e-9:
            return f'capture at {stamp:.3f} s is older than {min_stamp:.3f} s'
        views = self.inputs.views(names, stamp, rgb, self.mark, timeout=self.frames_timeout_s)
        if views is None:
            return f'frames of {", ".join(names)} at {stamp:.3f} s did not all arrive'
        return views, stamp

    def _joints(self, stamp: float) -> np.ndarray | None:
        """The arm's joints when the frames at `stamp` were taken: the capture's own (a joint
        state stamped alike may predate it: in fast-forward the arm moves without sim time
        passing, and a backlog of such states can still be arriving), else the first joint
        state stamped at or after the frames that arrived after the capture was asked for."""
        if self.capture_q is not None:
            return self.capture_q
        return self.inputs.joints_at(stamp, self.joint_names, self.mark)

    # Services -------------------------------------------------------------------------------
    def on_fuse(
        self, req: FuseHeightMap.Request, res: FuseHeightMap.Response
    ) -> FuseHeightMap.Response:
        if self.map_mode == 'oracle':
            gt = self._call(self.truth, GroundTruth.Request())
            if gt is None:
                res.error_code, res.error_msg = res.STALE_FRAMES, 'no ground truth answer'
                return res
            hm = stamp_heightmap(list(_truth_boxes(gt)), gt.held_package_id or None)
            res.heightmap = heightmap_to_msg(hm)
            res.heightmap.header.stamp = gt.stamp
        else:
            got = self._views(self.pallet_cams, False, stamp_s(req.min_stamp))
            if isinstance(got, str):
                res.error_code, res.error_msg = res.STALE_FRAMES, got
                return res
            views, stamp = got
            q = self._joints(stamp) if self.body else None
            if self.body is not None and q is None:
                res.error_code = res.STALE_FRAMES
                res.error_msg = f'no joint state at {stamp:.3f} s for the robot self-filter'
                return res
            held = None if self.held is None else tuple(self.held.dims_guess)
            fused = fuse_heightmap(views, self.fusion, self.pallet, self.body, q, held)
            if req.forget:
                self.memory.forget()
            answer = self.memory.remember(fused.heightmap, views, self.body, q, held)
            if self.memory.recalled:
                self.get_logger().debug(f'{self.memory.recalled} cells out of sight recalled')
            res.heightmap = heightmap_to_msg(answer)
            sec = int(stamp)
            res.heightmap.header.stamp = Time(sec=sec, nanosec=int(round((stamp - sec) * 1e9)))
            self.cloud_pub.publish(cloud_msg(fused.points, res.heightmap.header.stamp))
        self.pub.publish(res.heightmap)
        res.error_code = FuseHeightMap.Response.OK
        return res

    def on_detect(self, req: Detect.Request, res: Detect.Response) -> Detect.Response:
        if self.detector_mode == 'oracle':
            gt = self._call(self.truth, GroundTruth.Request())
            if gt is None:
                res.error_code, res.error_msg = res.STALE_FRAMES, 'no ground truth answer'
                return res
            # Every carton not in the gripper, with its true pose and size; the caller picks
            # the one the source presented.
            for pid, pos, quat, dims in _truth_boxes(gt):
                if pid != gt.held_package_id:
                    obs = Observation(pid, pos, yaw_of_quat(quat), dims, 1.0)
                    res.observations.append(observation_to_msg(obs))
        else:
            taken = self._views(self.pick_cams, True, stamp_s(req.min_stamp))
            if isinstance(taken, str):
                res.error_code, res.error_msg = res.STALE_FRAMES, taken
                return res
            views, _ = taken
            if self.source == 'truck':
                got = detect_truck(views, self.det, self.truck)
            else:
                got = detect_station(views[0], self.det, self.surface_z, self.station)
            if got.chosen is not None:
                obs = got.chosen.observation('')
                self.held = obs
                msg = observation_to_msg(obs)
                res.observations.append(msg)
                self.detection_pub.publish(msg)
            else:
                res.error_msg = got.reason
        res.error_code = res.OK if res.observations else res.NO_DETECTION
        return res

    def _views_and_joints(
        self,
        names: Sequence[str],
        min_stamp: Time,
        res: MeasureHeld.Response | MeasureLid.Response,
    ) -> tuple[list[CameraView], np.ndarray, float] | None:
        """(views, q, stamp) of a fresh depth capture of `names` and the arm's joints at it, or
        None with res's STALE_FRAMES and the why set."""
        got = self._views(names, False, stamp_s(min_stamp))
        if isinstance(got, str):
            res.error_code, res.error_msg = res.STALE_FRAMES, got
            return None
        views, stamp = got
        q = self._joints(stamp)
        if q is None:
            res.error_code = res.STALE_FRAMES
            res.error_msg = f'no joint state at {stamp:.3f} s to place the arm in the views'
            return None
        return views, q, stamp

    def on_measure_held(
        self, req: MeasureHeld.Request, res: MeasureHeld.Response
    ) -> MeasureHeld.Response:
        obs = observation_from_msg(req.observation)
        res.observation, res.confidence = req.observation, 1.0
        if self.detector_mode == 'oracle' or self.source != 'truck':
            # The oracle's sizes are true; a station detection measured the height already.
            res.error_code = res.OK
            return res
        taken = self._views_and_joints(self.det.held_cameras, req.min_stamp, res)
        if taken is None:
            return res
        views, q, stamp = taken
        got = held_height(
            views,
            self.det,
            self.held_body,
            q,
            obs,
            self.tcp_offset,
            self.cup_gap,
            self.truck.floor,
        )
        res.confidence = float(got.confidence)
        if got.height <= 0.0:
            # The reason alone, as the in-process wiring gives it; the pose goes to the log.
            res.error_code, res.error_msg = res.NO_MEASUREMENT, got.reason
            self.get_logger().warning(
                f'in-hand measurement of {obs.package_id}: {got.reason}; '
                f'q {np.round(q, 3).tolist()} at {stamp:.3f} s'
            )
            return res
        L, W, _ = obs.dims_guess
        held = dataclasses.replace(obs, dims_guess=(L, W, got.height))
        self.held = held
        res.observation = observation_to_msg(held)
        res.error_code = res.OK
        return res

    def on_measure_lid(
        self, req: MeasureLid.Request, res: MeasureLid.Response
    ) -> MeasureLid.Response:
        obs = observation_from_msg(req.observation)
        res.observation, res.confidence = req.observation, 1.0
        if self.detector_mode == 'oracle':
            # The oracle's sizes are true: the carton stands as believed.
            res.error_code = res.OK
            return res
        taken = self._views_and_joints(self.det.lid_cameras, req.min_stamp, res)
        if taken is None:
            return res
        views, q, _ = taken
        got = measure_lid(views, self.det, obs, self.held_body, q)
        res.confidence = float(got.confidence)
        if got.top_z <= 0.0:
            res.error_code, res.error_msg = res.NO_MEASUREMENT, got.reason
            return res
        res.observation = observation_to_msg(remeasured(obs, got.top_z))
        res.error_code = res.OK
        return res


def main(args: list[str] | None = None) -> None:
    run_node(DepthFusionNode, args, threads=4)


if __name__ == '__main__':
    main()
