"""Frames, camera intrinsics and ground-truth records of the cell, ready for TF and messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from palletizer.core.contracts import floats3
from palletizer.sim.cameras import CameraRig, Intrinsics

__all__ = [
    'TRUTH_PREFIX',
    'CartonRecord',
    'FramePose',
    'camera_frames',
    'camera_matrices',
    'carton_records',
    'cell_frames',
]

# Ground-truth carton frames live under this prefix: for visualisation and the referee only,
# never for control (ARCHITECTURE §5).
TRUTH_PREFIX = 'truth/'


@dataclass(frozen=True)
class FramePose:
    """child in parent: translation (3,) [m] and quaternion (4,) (w x y z)."""

    parent: str
    child: str
    pos: np.ndarray
    quat: np.ndarray


@dataclass(frozen=True)
class CartonRecord:
    """One carton as the referee sees it: world pose of its centre, dims [m], mass [kg] and
    CoG offset [m] in the package frame (from the load draw)."""

    package_id: str
    type_name: str
    pos: np.ndarray
    quat: np.ndarray
    dims: tuple[float, float, float]
    mass: float
    cog_offset: tuple[float, float, float]


def _quat(R: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=float).ravel())
    return q


def _relative(parent: tuple[np.ndarray, np.ndarray], child: tuple[np.ndarray, np.ndarray]):
    (pp, pR), (cp, cR) = parent, child
    return pR.T @ (cp - pp), _quat(pR.T @ cR)


def cell_frames(cell: Any, truth: bool = True) -> list[FramePose]:
    """world->pallet and, with `truth`, world->truth/<package_id> for every carton.

    The robot's own frames (base_link ... flange, tcp) come from the state_publisher node, from
    /joint_states and the URDF, exactly as on a real UR; publishing them here too would give
    `flange` two parents. Poses after the last step (kinematics rerun).
    """
    m, d = cell.model, cell.data
    mujoco.mj_kinematics(m, d)
    p = m.body('pallet').id
    out = [FramePose('world', 'pallet', d.xpos[p].copy(), d.xquat[p].copy())]
    if truth:
        for i in cell.carton_indices():
            c = m.body(f'package_{i}').id
            out.append(
                FramePose(
                    'world',
                    TRUTH_PREFIX + cell.package_id(i),
                    d.xpos[c].copy(),
                    d.xquat[c].copy(),
                )
            )
    return out


def camera_frames(cell: Any, names: Iterable[str]) -> list[FramePose]:
    """world-><name>_optical for each camera, REP-103 optical convention (z forward, x right,
    y down)."""
    mujoco.mj_kinematics(cell.model, cell.data)
    rig = CameraRig(cell.model)  # no renderer is made until a capture
    out = []
    for n in names:
        T = rig.pose(n, cell.data)
        out.append(FramePose('world', f'{n}_optical', T[:3, 3].copy(), _quat(T[:3, :3])))
    return out


def camera_matrices(intr: Intrinsics) -> tuple[list[float], list[float], list[float]]:
    """sensor_msgs/CameraInfo k (3x3), r (3x3) and p (3x4), row-major, for an ideal pinhole."""
    k = intr.K
    p = np.hstack([k, np.zeros((3, 1))])
    return k.ravel().tolist(), np.eye(3).ravel().tolist(), p.ravel().tolist()


def carton_records(gt: Any, draws: Mapping[str, Any]) -> list[CartonRecord]:
    """Join a Cell.ground_truth() snapshot with the load draws (type, mass, CoG) by package id.

    A carton without a draw (placed by hand in a test scene) gets type '' and mass 0.
    """
    out = []
    for pid, c in sorted(gt.cartons.items(), key=lambda kv: kv[1].index):
        d = draws.get(pid)
        out.append(
            CartonRecord(
                pid,
                d.type_name if d is not None else '',
                np.asarray(c.pos, float),
                np.asarray(c.quat, float),
                floats3(c.dims),
                float(d.mass) if d is not None else 0.0,
                floats3(d.cog_offset) if d is not None else (0.0, 0.0, 0.0),
            )
        )
    return out
