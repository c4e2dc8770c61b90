"""Depth-fusion node: the pallet height map and carton detection at the pick station.

Mode `oracle` (the only one in this version) reads the cell's ground truth: it stamps true
carton footprints on the 1 cm grid and reports the presented carton's true pose. It is an
oracle stub and says so in its `mode` parameter, which the director reads to set the run's
oracle flag.
"""

from __future__ import annotations

import threading

from palletizer_msgs.msg import HeightMap as HeightMapMsg
from palletizer_msgs.srv import Detect, FuseHeightMap, GroundTruth
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node

from palletizer.core.contracts import Observation
from palletizer.core.fusion import stamp_heightmap, yaw_of_quat
from palletizer.nodes.convert import heightmap_to_msg, observation_to_msg
from palletizer.nodes.qos import LATCHED
from palletizer.nodes.spin import run_node

__all__ = ['DepthFusionNode', 'main']


def _truth_boxes(res: GroundTruth.Response):
    for c in res.cartons:
        p, o = c.pose.position, c.pose.orientation
        yield c.package_id, (p.x, p.y, p.z), (o.w, o.x, o.y, o.z), tuple(c.dims_m)


class DepthFusionNode(Node):
    def __init__(self) -> None:
        super().__init__('depth_fusion')
        self.mode = self.declare_parameter(
            'mode',
            'oracle',
            ParameterDescriptor(
                description='oracle = height map and detection from ground truth '
                '(marks the run oracle)',
                read_only=True,
            ),
        ).value
        truth = self.declare_parameter(
            'ground_truth_service',
            '/cell_bridge/ground_truth',
            ParameterDescriptor(description='the cell referee service the oracle reads'),
        ).value
        # Service callbacks wait on the cell's ground-truth service: they run in their own
        # group while the client's responses arrive on another thread of the executor.
        self.serve_group = MutuallyExclusiveCallbackGroup()
        self.client_group = ReentrantCallbackGroup()
        self.truth = self.create_client(GroundTruth, truth, callback_group=self.client_group)
        self.pub = self.create_publisher(HeightMapMsg, 'heightmap', LATCHED)
        self.create_service(FuseHeightMap, '~/fuse', self.on_fuse, callback_group=self.serve_group)
        self.create_service(Detect, '~/detect', self.on_detect, callback_group=self.serve_group)

    def _ground_truth(self) -> GroundTruth.Response | None:
        if not self.truth.wait_for_service(timeout_sec=10.0):
            return None
        done = threading.Event()
        fut = self.truth.call_async(GroundTruth.Request())
        fut.add_done_callback(lambda _f: done.set())
        done.wait(timeout=30.0)
        return fut.result() if fut.done() else None

    def on_fuse(self, req: FuseHeightMap.Request, res: FuseHeightMap.Response):
        gt = self._ground_truth()
        if gt is None:
            res.error_code, res.error_msg = (
                FuseHeightMap.Response.STALE_FRAMES,
                'no ground truth answer',
            )
            return res
        hm = stamp_heightmap(list(_truth_boxes(gt)), gt.held_package_id or None)
        res.heightmap = heightmap_to_msg(hm)
        res.heightmap.header.stamp = gt.stamp
        self.pub.publish(res.heightmap)
        res.error_code = FuseHeightMap.Response.OK
        return res

    def on_detect(self, req: Detect.Request, res: Detect.Response):
        gt = self._ground_truth()
        if gt is None:
            res.error_code, res.error_msg = Detect.Response.STALE_FRAMES, 'no ground truth answer'
            return res
        # The oracle reports every carton not in the gripper, with its true pose and size; the
        # caller picks the one the source presented.
        for pid, pos, quat, dims in _truth_boxes(gt):
            if pid != gt.held_package_id:
                res.observations.append(
                    observation_to_msg(Observation(pid, pos, yaw_of_quat(quat), dims, 1.0))
                )
        res.error_code = Detect.Response.OK if res.observations else Detect.Response.NO_DETECTION
        return res


def main(args=None) -> None:
    run_node(DepthFusionNode, args, threads=3)


if __name__ == '__main__':
    main()
