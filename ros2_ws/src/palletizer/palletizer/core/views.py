"""Camera views as perception reads them: depth, colour, intrinsics and pose, ROS- and MuJoCo-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ['CameraView']


@dataclass(frozen=True)
class CameraView:
    """One camera capture.

    depth: (H, W) float32 planar camera Z [m]; 0 or NaN where the sensor returned nothing.
    rgb: (H, W, 3) uint8 or None. K: (3, 3) pinhole camera matrix [px].
    T_world_optical: (4, 4) pose of the optical frame (x right, y down, z forward) in the world.
    stamp: sim time of the capture [s].
    """

    name: str
    depth: np.ndarray
    rgb: np.ndarray | None
    K: np.ndarray
    T_world_optical: np.ndarray
    stamp: float = 0.0

    @property
    def shape(self) -> tuple[int, int]:
        """(H, W) [px] of the depth image."""
        return (int(self.depth.shape[0]), int(self.depth.shape[1]))
