"""The reach port: can the arm put the tool, pointing down, at these poses?"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ['ReachOracle']


@runtime_checkable
class ReachOracle(Protocol):
    """Vectorised reachability of tool-down TCP poses (world frame).

    x, y, z_tcp: (N,) TCP position [m]; yaw: (N,) rotation about world Z [rad].
    Returns an (N,) bool array, True where the pose is reachable.
    """

    def reachable(
        self, x: np.ndarray, y: np.ndarray, z_tcp: np.ndarray, yaw: np.ndarray
    ) -> np.ndarray: ...
