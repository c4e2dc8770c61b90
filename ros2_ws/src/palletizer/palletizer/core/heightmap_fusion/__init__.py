"""The pallet height map fused from depth cameras: unproject, self-filter the robot, robust per cell.

ROS- and MuJoCo-free (numpy and cv2). Input: CameraView (planar depth, K, T_world_optical);
output: the HeightMap contract (heights above the deck, observed mask, 1 cm grid over the
pallet) and the kept points in the world frame.

Modules: params (FusionParams, FusionError), robot (RobotBody, the self-filter's model of the
arm), points (depth views to filtered world points), cells (per-cell estimates, hole filling,
deck bridging), lids (lid rectangles and the edge cells completed from them), fuse
(fuse_heightmap, FusionResult, map_errors), recall (recall_hidden, MapMemory). This package
re-exports the public API.
"""

from __future__ import annotations

from palletizer.core.heightmap_fusion.fuse import FusionResult, fuse_heightmap, map_errors
from palletizer.core.heightmap_fusion.recall import MapMemory, recall_hidden
from palletizer.core.heightmap_fusion.robot import RobotBody
from palletizer.core.params.fusion import FusionError, FusionParams

__all__ = [
    'FusionError',
    'FusionParams',
    'FusionResult',
    'MapMemory',
    'RobotBody',
    'fuse_heightmap',
    'map_errors',
    'recall_hidden',
]
