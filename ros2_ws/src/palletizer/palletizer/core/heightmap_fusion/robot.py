"""The robot self-filter's model: the UR10e, its gripper and a held carton as capsules and boxes
posed by DH kinematics (RobotBody). The fusion and the recall drop points inside it; the
detector's in-hand measure takes the flange pose from its frames.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.config.cell import CellConfig

__all__ = ['RobotBody']


# UR10e link shapes along the DH chain (radius [m]; offsets [m] along the parallel joint 2-4
# axes). Offsets and radii: Menagerie's ur10e collision capsules (mujoco-notes "UR10e"):
# upper arm 0.176 out from the DH line, forearm 0.176 - 0.137 = 0.039, wrist 1 up to d4.
_SHOULDER_OFF = 0.176
_FOREARM_OFF = 0.039
# [m] wrist 2's capsule runs this far behind its joint's DH origin (along -z4): the simulated
# arm's wrist_2_col0 ends 0.055 m back (centre 0.01 forward, half-length 0.065). At 0.03 the
# checks missed 25 mm of it, and level 15 seed 1 drove it into the pick table's corner.
_WRIST_2_BACK = 0.056
# [m] wrist 1's capsule starts this far out from DH origin 3 along the joint axes; the
# simulated wrist_1_col reaches 0.029 (from the forearm's 0.039 it left 2 mm of it out).
_WRIST_1_FROM = 0.025


@dataclass(frozen=True)
class RobotBody:
    """The UR10e, its gripper and a held carton as capsules and boxes posed by DH kinematics.

    base_pos (3,) [m] and base_quat (w, x, y, z) of the MuJoCo base (turned 180 deg about Z from
    the DH base, sim/robot.py T_world_dhbase); dh: d1 a2 a3 d4 d5 d6 [m]; gripper: body
    L x W x flange-to-cup [m] in the flange frame (L along flange x); margin: inflation [m].
    """

    base_pos: tuple[float, float, float] = (0.60, -0.72, 0.48)
    base_quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, -1.0)
    dh: tuple[float, ...] = (0.1807, -0.6127, -0.57155, 0.17415, 0.11985, 0.11655)
    gripper: tuple[float, float, float] = (0.264, 0.184, 0.092)
    margin: float = 0.04

    @classmethod
    def from_config(cls, cell: CellConfig, margin: float = 0.04) -> RobotBody:
        """From configs/cell.yaml (Config.cell): robot base pose, DH, gripper body."""
        r, g, dh = cell.robot, cell.gripper, cell.robot.dh
        return cls(
            base_pos=r.base_pos,
            base_quat=r.base_quat,
            dh=(dh.d1, dh.a2, dh.a3, dh.d4, dh.d5, dh.d6),
            gripper=(g.body[0], g.body[1], g.tcp_offset),
            margin=float(margin),
        )

    def T_world_dhbase(self) -> np.ndarray:
        """(4, 4) pose of the DH base frame in the world."""
        w, x, y, z = np.asarray(self.base_quat, dtype=float) / np.linalg.norm(self.base_quat)
        R = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
            ]
        )
        T = np.eye(4)
        T[:3, :3] = R @ np.diag([-1.0, -1.0, 1.0])
        T[:3, 3] = self.base_pos
        return T

    def frames(self, q: np.ndarray) -> np.ndarray:
        """World poses (7, 4, 4) of DH frames 0..6 (6 = flange) at joint positions q (6,) [rad]."""
        d1, a2, a3, d4, d5, d6 = self.dh
        a = (0.0, a2, a3, 0.0, 0.0, 0.0)
        d = (d1, 0.0, 0.0, d4, d5, d6)
        alpha = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)
        out = np.empty((7, 4, 4))
        T = self.T_world_dhbase()
        out[0] = T
        for i in range(6):
            ct, st = math.cos(float(q[i])), math.sin(float(q[i]))
            ca, sa = math.cos(alpha[i]), math.sin(alpha[i])
            A = np.array(
                [
                    [ct, -st * ca, st * sa, a[i] * ct],
                    [st, ct * ca, -ct * sa, a[i] * st],
                    [0.0, sa, ca, d[i]],
                    [0.0, 0.0, 0.0, 1.0],
                ]
            )
            T = T @ A
            out[i + 1] = T
        return out

    def shapes(
        self, q: np.ndarray, held_dims: Sequence[float] | None = None
    ) -> tuple[list[tuple[np.ndarray, np.ndarray, float]], list[tuple[np.ndarray, np.ndarray]]]:
        """Capsules [(a (3,), b (3,), radius)] and boxes [(T_world_box (4, 4), half (3,))],
        not inflated. The held carton hangs below the cups; its footprint is taken square
        (its longer side both ways) so its yaw on the cups does not matter."""
        F = self.frames(np.asarray(q, dtype=float))
        o = F[:, :3, 3]
        ax = F[1, :3, 2]  # joint 2..4 axes (parallel)
        caps = [
            (o[0] - np.array([0.0, 0.0, 0.05]), o[1], 0.095),
            (o[1], o[1] + _SHOULDER_OFF * ax, 0.078),
            (o[1] + _SHOULDER_OFF * ax, o[2] + _SHOULDER_OFF * ax, 0.078),
            (o[2] + _SHOULDER_OFF * ax, o[2] + _FOREARM_OFF * ax, 0.065),
            (o[2] + _FOREARM_OFF * ax, o[3] + _FOREARM_OFF * ax, 0.058),
            (o[3] + _WRIST_1_FROM * ax, o[4] + 0.03 * F[3, :3, 2], 0.05),
            (o[4] - _WRIST_2_BACK * F[4, :3, 2], o[5], 0.046),
            (o[5] - 0.03 * F[5, :3, 2], o[6], 0.046),
        ]
        L, W, H = self.gripper
        Tf = F[6]
        boxes = []
        Tg = Tf.copy()
        Tg[:3, 3] = Tf[:3, 3] + Tf[:3, 2] * (H / 2)
        boxes.append((Tg, np.array([L / 2, W / 2, H / 2])))
        if held_dims is not None:
            hl, hw, h = (float(v) for v in held_dims)
            s = max(hl, hw) / 2
            Tc = Tf.copy()
            Tc[:3, 3] = Tf[:3, 3] + Tf[:3, 2] * (H + h / 2)
            boxes.append((Tc, np.array([s, s, h / 2])))
        return caps, boxes

    def contains(
        self,
        points: np.ndarray,
        q: np.ndarray,
        held_dims: Sequence[float] | None = None,
        margin: float | None = None,
    ) -> np.ndarray:
        """(N,) True where points (N, 3) [m, world] lie inside the inflated robot body."""
        pts = np.asarray(points, dtype=np.float32).reshape(-1, 3)
        m = self.margin if margin is None else float(margin)
        caps, boxes = self.shapes(q, held_dims)
        out = np.zeros(len(pts), dtype=bool)
        # Cull with the body's bounding box first: the arm usually covers little of the view.
        lo = np.full(3, np.inf)
        hi = np.full(3, -np.inf)
        for a, b, r in caps:
            lo = np.minimum(lo, np.minimum(a, b) - r - m)
            hi = np.maximum(hi, np.maximum(a, b) + r + m)
        for T, half in boxes:
            ext = np.abs(T[:3, :3]) @ (half + m)
            lo = np.minimum(lo, T[:3, 3] - ext)
            hi = np.maximum(hi, T[:3, 3] + ext)
        near = np.flatnonzero(np.all((pts >= lo) & (pts <= hi), axis=1))
        if near.size == 0:
            return out
        P = pts[near].astype(np.float64)
        hit = np.zeros(len(P), dtype=bool)
        for a, b, r in caps:
            ab = b - a
            t = np.clip(((P - a) @ ab) / max(float(ab @ ab), 1e-12), 0.0, 1.0)
            dvec = P - a - t[:, None] * ab
            hit |= np.einsum('ij,ij->i', dvec, dvec) <= (r + m) ** 2
        for T, half in boxes:
            local = (P - T[:3, 3]) @ T[:3, :3]
            hit |= np.all(np.abs(local) <= half + m, axis=1)
        out[near] = hit
        return out
