"""Depth-fusion node: the pallet height map and carton detection at the pick, from the cameras.

Parameters `map` and `detector` are each `cameras` (the default: depth images, CameraInfo and
the optical frames on /tf_static, fused and detected by palletizer.core) or `oracle` (the cell's
ground truth: the director reads these parameters and flags the run). With cameras, the node
asks the cell for a capture (`capture_service`, the simulated cell's; empty where the cameras
stream on their own) and waits for the frames of that capture's stamp. Its parts beside it: the
parameters (depth_params.py) and the captures (depth_capture.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

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
from palletizer.core.detection.label import read_held_label
from palletizer.core.fusion import stamp_heightmap, yaw_of_quat
from palletizer.core.gauge import type_from_label
from palletizer.core.heightmap_fusion import (
    MapMemory,
    RobotBody,
    fuse_heightmap,
)
from palletizer.nodes.camera_inputs import CameraInputs, cloud_msg
from palletizer.nodes.convert import (
    heightmap_to_msg,
    observation_from_msg,
    observation_to_msg,
    stamp_s,
)
from palletizer.nodes.depth_capture import FrameCapture, call
from palletizer.nodes.depth_params import declare_params
from palletizer.nodes.qos import LATCHED
from palletizer.nodes.spin import run_node

__all__ = ['DepthFusionNode', 'main']

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
        self.params = p = declare_params(self)
        self.map_mode, self.detector_mode = p.map_mode, p.detector_mode  # what it runs
        cfg = load_config()
        level = cfg.level(p.level or cfg.default_level)
        self.source, self.labels = level.source, level.labels
        self.catalogue = cfg.catalogue
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
        if self.labels:
            held_cams += tuple(self.det.label_cameras)
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
        oracle = 'oracle' in (p.map_mode, p.detector_mode)
        self.truth = (
            self.create_client(GroundTruth, p.truth_service, callback_group=self.client_group)
            if oracle
            else None
        )
        capture = (
            self.create_client(Capture, p.capture_service, callback_group=self.client_group)
            if p.capture_service
            else None
        )
        self.inputs = CameraInputs(
            self,
            tuple(
                dict.fromkeys(self.pallet_cams + self.pick_cams + held_cams + self.det.lid_cameras)
            ),
            group=self.client_group,
            topics=p.topics,
        )
        self.frames = FrameCapture(self.inputs, capture, self.joint_names, p.frames_timeout_s)
        self.held: Observation | None = None
        self.memory = MapMemory(self.fusion, self.pallet)  # what this episode's fusions saw
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

    # Services -------------------------------------------------------------------------------
    def on_fuse(
        self, req: FuseHeightMap.Request, res: FuseHeightMap.Response
    ) -> FuseHeightMap.Response:
        if self.map_mode == 'oracle':
            gt = call(self.truth, GroundTruth.Request())
            if gt is None:
                res.error_code, res.error_msg = res.STALE_FRAMES, 'no ground truth answer'
                return res
            hm = stamp_heightmap(list(_truth_boxes(gt)), gt.held_package_id or None)
            res.heightmap = heightmap_to_msg(hm)
            res.heightmap.header.stamp = gt.stamp
        else:
            got = self.frames.views(self.pallet_cams, False, stamp_s(req.min_stamp))
            if isinstance(got, str):
                res.error_code, res.error_msg = res.STALE_FRAMES, got
                return res
            views, stamp = got
            q = self.frames.joints(stamp) if self.body else None
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
            gt = call(self.truth, GroundTruth.Request())
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
            taken = self.frames.views(self.pick_cams, True, stamp_s(req.min_stamp))
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

    def on_measure_held(
        self, req: MeasureHeld.Request, res: MeasureHeld.Response
    ) -> MeasureHeld.Response:
        obs = observation_from_msg(req.observation)
        res.observation, res.confidence = req.observation, 1.0
        # The oracle's sizes are true; a station detection measured the height already.
        measure = self.detector_mode != 'oracle' and self.source == 'truck'
        held = self._held_height(req, res, obs) if measure else obs
        if held is None:
            return res
        if self.labels and self.detector_mode != 'oracle':
            taken = self.frames.views_and_joints(
                self.det.label_cameras, req.min_stamp, res, rgb=True
            )
            if taken is None:
                return res
            views, q, _ = taken
            seen = read_held_label(
                views,
                held,
                self.held_body,
                q,
                self.cup_gap,
                self.catalogue,
                type_from_label(held.package_id),
                self.det,
            )
            res.label_read, res.label_face = True, seen.face
            res.label_how = seen.how or seen.reason
        self.held = held
        res.observation = observation_to_msg(held)
        res.error_code = res.OK
        return res

    def _held_height(
        self, req: MeasureHeld.Request, res: MeasureHeld.Response, obs: Observation
    ) -> Observation | None:
        """The truck carton's height from the in-hand cameras; None with res's error set."""
        taken = self.frames.views_and_joints(self.det.held_cameras, req.min_stamp, res)
        if taken is None:
            return None
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
            return None
        L, W, _ = obs.dims_guess
        return dataclasses.replace(obs, dims_guess=(L, W, got.height))

    def on_measure_lid(
        self, req: MeasureLid.Request, res: MeasureLid.Response
    ) -> MeasureLid.Response:
        obs = observation_from_msg(req.observation)
        res.observation, res.confidence = req.observation, 1.0
        if self.detector_mode == 'oracle':
            # The oracle's sizes are true: the carton stands as believed.
            res.error_code = res.OK
            return res
        taken = self.frames.views_and_joints(self.det.lid_cameras, req.min_stamp, res)
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
