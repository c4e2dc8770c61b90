"""Camera views as perception reads them: depth, colour, intrinsics and pose, ROS- and MuJoCo-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ['POSE_DECIMALS', 'CameraView']

# A camera pose is kept to 1e-12 (m, and of its rotation's entries): CameraView.
POSE_DECIMALS = 12


@dataclass(frozen=True)
class CameraView:
    """One camera capture.

    depth: (H, W) float32 planar camera Z [m]; 0 or NaN where the sensor returned nothing.
    rgb: (H, W, 3) uint8 or None. K: (3, 3) pinhole camera matrix [px].
    T_world_optical: (4, 4) pose of the optical frame (x right, y down, z forward) in the world,
    kept to POSE_DECIMALS.
    stamp: sim time of the capture [s].
    """

    name: str
    depth: np.ndarray
    rgb: np.ndarray | None
    K: np.ndarray
    T_world_optical: np.ndarray
    stamp: float = 0.0

    def __post_init__(self) -> None:
        # The pose to a picometre, no negative zeros: the node graph reads it from /tf_static
        # through tf2, whose quaternion arithmetic leaves it a last bit (4e-16) off the pose
        # the in-process loop reads from the simulator, and the two runs' placements then
        # differed by 1e-15 m (scripts/bench graph). A calibration is good to 0.1 mm.
        T = np.round(np.asarray(self.T_world_optical, dtype=float), POSE_DECIMALS) + 0.0
        object.__setattr__(self, 'T_world_optical', T)

    @property
    def shape(self) -> tuple[int, int]:
        """(H, W) [px] of the depth image."""
        return (int(self.depth.shape[0]), int(self.depth.shape[1]))
