"""The pallet height map fused from depth cameras: unproject, self-filter the robot, robust per cell.

ROS- and MuJoCo-free (numpy and cv2). Input: CameraView (planar depth, K, T_world_optical);
output: the HeightMap contract (heights above the deck, observed mask, 1 cm grid over the
pallet) and the kept points in the world frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import cv2
import numpy as np

from palletizer.core.contracts import HeightMap, PalletGeometry
from palletizer.core.errors import PalletizerError

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


class FusionError(PalletizerError):
    """Unusable fusion settings or inputs."""


@dataclass(frozen=True)
class FusionParams:
    """Height-map fusion settings (configs/perception.yaml `heightmap`).

    cell: grid cell edge [m]. min_upward_nz: smallest |n_z| of a kept surface (lids and deck;
    box sides dropped). depth_range: valid planar depth [m]. z_range: band of heights kept,
    relative to the deck [m] (below zero: the deck's own noise). normal_px: half-width [px] of the
    stencil the normals are taken over, on the depth median-filtered over 5 x 5 pixels.
    bin: height histogram bin [m] of the per-cell mode; band: half-width [m] around the mode whose
    points are averaged. min_points: points a cell needs to count as observed. fill_neighbours,
    fill_tol: an unobserved cell is filled when at least this many of its 8 neighbours are
    observed and span at most fill_tol [m]. robot_margin: inflation of the robot body [m].
    up_erode_px: pixels within this of a side face (|n_z| < 0.5) are dropped (0: off).
    below_deck: returns down to this below the deck [m] count as deck where their ray crosses
    the deck plane. deck_bridge: unobserved runs of up to this many cells between deck-high
    cells are deck (the board gaps).
    edge_fill: complete the cells the edge and normal filters leave unobserved round each lid
    (the 1-2 cells of every lid edge) from rectangles fitted to the lids, cartons being boxes:
    a cell whose centre lies in a lid's rectangle takes the lid's height; one outside every
    rectangle but within lid_ring [m] of one takes the height of the observed cells beyond,
    when at least two of its neighbours outside every rectangle are observed and agree within
    fill_tol (lid_ring_iters passes). lid_tol: height tolerance [m] of one lid's cells;
    lid_band [m]: returns within this of a lid's height are the lid's; lid_trim: percentile
    [%] trimmed off each end of the lid returns' extent; lid_widen: share of a pixel's
    footprint the extent is widened by on each side (the outermost returns' pixel centres lie
    on average half a pixel inside the edge); lid_other, lid_fill: a rectangle is rejected
    when more than lid_other of the cells it holds are observed at other heights or fewer
    than lid_fill are the lid's.
    """

    cameras: tuple[str, ...] = ('top', 'diag_a', 'diag_b')
    cell: float = 0.010
    min_upward_nz: float = 0.8
    depth_range: tuple[float, float] = (0.05, 8.0)
    z_range: tuple[float, float] = (-0.03, 2.0)
    normal_px: int = 2
    edge_px: int = 2
    edge_jump: float = 0.02
    bin: float = 0.01
    band: float = 0.012
    min_points: int = 2
    fill_neighbours: int = 5
    fill_tol: float = 0.004
    robot_margin: float = 0.04
    up_erode_px: int = 0
    below_deck: float = 0.2
    deck_bridge: int = 3
    edge_fill: bool = True
    lid_tol: float = 0.006
    lid_band: float = 0.015
    lid_trim: float = 0.3
    lid_widen: float = 0.5
    lid_other: float = 0.01
    lid_fill: float = 0.8
    lid_ring: float = 0.03
    lid_ring_iters: int = 2
    recall: bool = True
    recall_tol: float = 0.02

    def __post_init__(self) -> None:
        if not self.cell > 0 or not self.bin > 0 or not self.band > 0:
            raise FusionError(
                f'heightmap: cell {self.cell!r}, bin {self.bin!r}, band {self.band!r} must be > 0'
            )
        if not self.depth_range[0] < self.depth_range[1] or not self.z_range[0] < self.z_range[1]:
            raise FusionError(
                f'heightmap: depth_range {self.depth_range!r} and z_range {self.z_range!r} must '
                'be (low, high) with low < high'
            )
        if not 1 <= self.normal_px <= 10 or not 1 <= self.fill_neighbours <= 8:
            raise FusionError(
                f'heightmap: normal_px {self.normal_px!r} in 1..10 and fill_neighbours '
                f'{self.fill_neighbours!r} in 1..8'
            )

    @classmethod
    def from_config(cls, hm: Mapping[str, Any]) -> FusionParams:
        """From configs/perception.yaml `heightmap` (Config.perception['heightmap'])."""
        d = cls()

        def get(key: str, default: Any) -> Any:
            return hm.get(key, default) if hm.get(key) is not None else default

        return cls(
            cameras=tuple(str(c) for c in get('cameras', d.cameras)),
            cell=float(get('cell', d.cell)),
            min_upward_nz=float(get('min_upward_nz', d.min_upward_nz)),
            depth_range=tuple(float(v) for v in get('depth_range', d.depth_range)),  # type: ignore[arg-type]
            z_range=tuple(float(v) for v in get('z_range', d.z_range)),  # type: ignore[arg-type]
            normal_px=int(get('normal_px', d.normal_px)),
            edge_px=int(get('edge_px', d.edge_px)),
            edge_jump=float(get('edge_jump', d.edge_jump)),
            bin=float(get('bin', d.bin)),
            band=float(get('band', d.band)),
            min_points=int(get('min_points', d.min_points)),
            fill_neighbours=int(get('fill_neighbours', d.fill_neighbours)),
            fill_tol=float(get('fill_tol', d.fill_tol)),
            robot_margin=float(get('robot_margin', d.robot_margin)),
            up_erode_px=int(get('up_erode_px', d.up_erode_px)),
            below_deck=float(get('below_deck', d.below_deck)),
            deck_bridge=int(get('deck_bridge', d.deck_bridge)),
            edge_fill=bool(get('edge_fill', d.edge_fill)),
            lid_tol=float(get('lid_tol', d.lid_tol)),
            lid_band=float(get('lid_band', d.lid_band)),
            lid_trim=float(get('lid_trim', d.lid_trim)),
            lid_widen=float(get('lid_widen', d.lid_widen)),
            lid_other=float(get('lid_other', d.lid_other)),
            lid_fill=float(get('lid_fill', d.lid_fill)),
            lid_ring=float(get('lid_ring', d.lid_ring)),
            lid_ring_iters=int(get('lid_ring_iters', d.lid_ring_iters)),
            recall=bool(get('recall', d.recall)),
            recall_tol=float(get('recall_tol', d.recall_tol)),
        )


# UR10e link shapes along the DH chain (radius [m]; offsets [m] along the parallel joint 2-4
# axes). Offsets and radii: Menagerie's ur10e collision capsules (mujoco-notes "UR10e"):
# upper arm 0.176 out from the DH line, forearm 0.176 - 0.137 = 0.039, wrist 1 up to d4.
_SHOULDER_OFF = 0.176
_FOREARM_OFF = 0.039


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
    def from_config(cls, cell: Mapping[str, Any], margin: float = 0.04) -> RobotBody:
        """From configs/cell.yaml (Config.cell): robot base pose, DH, gripper body."""
        r, g = cell['robot'], cell['gripper']
        dh = r['dh']
        return cls(
            base_pos=tuple(float(v) for v in r['base_pos']),  # type: ignore[arg-type]
            base_quat=tuple(float(v) for v in r['base_quat']),  # type: ignore[arg-type]
            dh=tuple(float(dh[k]) for k in ('d1', 'a2', 'a3', 'd4', 'd5', 'd6')),
            gripper=(float(g['body'][0]), float(g['body'][1]), float(g['tcp_offset'])),
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
            (o[3] + _FOREARM_OFF * ax, o[4] + 0.03 * F[3, :3, 2], 0.05),
            (o[4] - 0.03 * F[4, :3, 2], o[5], 0.046),
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


@dataclass(frozen=True)
class FusionResult:
    """The fused map, the points it was made of (N, 3) float32 [m, world] and how many points
    the robot self-filter removed."""

    heightmap: HeightMap
    points: np.ndarray
    dropped_robot: int


def _view_points(
    view: Any,
    params: FusionParams,
    R_keep: tuple[float, float, float, float, float, float],
    deck: float,
) -> np.ndarray:
    """World points (N, 3) float32 of a view's valid, upward-facing pixels inside the box
    R_keep = (x0, x1, y0, y1, z0, z1) [m]; deck: the deck plane's height [m].

    A return below the deck plane came through a gap between the deck boards (or is the
    deck's own noise): it becomes the point where its ray crosses the deck plane, at deck
    height. Those points skip the edge and normal filters, which the 17 mm board gaps would
    otherwise wipe out with a few pixels of the boards either side.
    """
    depth = np.asarray(view.depth, dtype=np.float32)
    K = np.asarray(view.K, dtype=np.float64)
    T = np.asarray(view.T_world_optical, dtype=np.float64)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    R = T[:3, :3].astype(np.float32)
    t = T[:3, 3].astype(np.float32)
    x0, x1, y0, y1, z0, z1 = R_keep
    # Only the image rectangle the keep box projects into is worked on (plus the filter
    # margins): the pallet fills about half of a pallet camera's image.
    r0, r1, c0, c1 = _roi(depth, K, T, R_keep, deck)
    if r1 - r0 < 8 or c1 - c0 < 8:
        return np.zeros((0, 3), np.float32)
    z = depth[r0:r1, c0:c1]
    z = np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
    valid = (z > params.depth_range[0]) & (z < params.depth_range[1])
    a = ((np.arange(c0, c1) - cx) / fx).astype(np.float32)[None, :]
    b = ((np.arange(r0, r1) - cy) / fy).astype(np.float32)[:, None]
    # World x, y, z of every pixel: p_world = R (a z, b z, z) + t.
    ra = R[:, 0:1, None] * a  # (3, 1, W)
    rb = R[:, 1:2, None] * b  # (3, H, 1)
    # The sensor's 1 mm depth unit makes a uint16 image of it exact, and cv2's 5 x 5 median is
    # fast on it. The median keeps edges where they are and cuts the per-pixel noise about
    # 2.5 x; that matters beyond the height: noise moves a point along its ray, so an oblique
    # view spills lid points over the carton edge by about the depth error.
    zmm = np.round(z * 1000.0).clip(0, 65535).astype(np.uint16)
    # Lost returns enter the median half as nearest, half as farthest (a checkerboard): as 0
    # alone they counted as nearest, and the sensor loses half the pixels at a depth step, so a
    # lid's median grew 1-2 px over its edge (lid heights on the cells beside it). A window
    # mostly lost is lost: otherwise a lid grows into the lost returns beside it.
    board = ((np.arange(r0, r1)[:, None] + np.arange(c0, c1)[None, :]) & 1).astype(bool)
    zmm[~valid] = np.where(board[~valid], np.uint16(65535), np.uint16(0))
    zmed = cv2.medianBlur(zmm, 5)
    n_valid = cv2.boxFilter(valid.astype(np.uint8), -1, (5, 5), normalize=False)
    zmed[(zmed == 65535) | (n_valid < 13)] = 0
    zs = zmed.astype(np.float32) * 0.001
    # Direction of every pixel's ray per unit planar depth, in the world.
    dz = ra[2] + rb[2] + R[2, 2]
    dx = ra[0] + rb[0] + R[0, 2]
    dy = ra[1] + rb[1] + R[1, 2]
    Wz = dz * zs + t[2]
    ok = valid & (zs > 0)
    below = ok & (Wz < deck) & (Wz >= deck - params.below_deck)
    # Pixels near a depth discontinuity are dropped: carton sides seen edge-on, flying pixels,
    # and edge cells that would otherwise take points of both surfaces.
    # Lost returns (0) are no step: the D415 loses the whole 17 mm gap between deck boards,
    # and counting that as a step took a further edge_px of the boards either side.
    kern = np.ones((2 * params.edge_px + 1,) * 2, np.uint8)
    zhi_ = cv2.dilate(zmed, kern)
    zlo_ = cv2.erode(np.where(zmed > 0, zmed, np.uint16(65535)), kern)
    span = zhi_.astype(np.int32) - zlo_.astype(np.int32)
    keep = ok & (span <= int(params.edge_jump * 1000.0)) & (Wz >= deck) & (Wz <= z1)
    # Normals over +-k pixels of the filtered depth; |n_z| in the world. The upward mask is
    # eroded by up_erode_px: the 5 x 5 median rounds a carton's top edge, so lid-high points
    # of the side face just below it pass as upward and land outside the footprint.
    k = params.normal_px
    Xs, Ys = zs * a, zs * b
    du = [M[k:-k, 2 * k :] - M[k:-k, : -2 * k] for M in (Xs, Ys, zs)]
    dv = [M[2 * k :, k:-k] - M[: -2 * k, k:-k] for M in (Xs, Ys, zs)]
    n0 = du[1] * dv[2] - du[2] * dv[1]
    n1 = du[2] * dv[0] - du[0] * dv[2]
    n2 = du[0] * dv[1] - du[1] * dv[0]
    nzw = R[2, 0] * n0 + R[2, 1] * n1 + R[2, 2] * n2
    nn = n0 * n0 + n1 * n1 + n2 * n2
    nz2 = nzw * nzw
    up = np.zeros(z.shape, dtype=bool)
    up[k:-k, k:-k] = nz2 >= (params.min_upward_nz**2) * nn
    keep &= up
    if params.up_erode_px > 0:
        side = np.zeros(z.shape, dtype=np.uint8)
        side[k:-k, k:-k] = (nz2 < 0.25 * nn) & (nn > 0)
        side = cast(np.ndarray, cv2.morphologyEx(side, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)))
        side = cast(
            np.ndarray, cv2.dilate(side, np.ones((2 * params.up_erode_px + 1,) * 2, np.uint8))
        )
        keep &= side == 0
    Wx = dx * zs + t[0]
    Wy = dy * zs + t[1]
    pz = Wz[keep]
    px, py = Wx[keep], Wy[keep]
    # Below-deck returns: where the ray crosses the deck plane, exact whatever the depth noise.
    s = (deck - t[2]) / dz[below]
    qx = t[0] + dx[below] * s
    qy = t[1] + dy[below] * s
    pts = np.concatenate(
        [
            np.stack([px, py, pz], axis=1),
            np.stack([qx, qy, np.full_like(qx, deck)], axis=1),
        ]
    )
    inside = (pts[:, 0] >= x0) & (pts[:, 0] < x1) & (pts[:, 1] >= y0) & (pts[:, 1] < y1)
    return pts[inside]


def _roi(
    depth: np.ndarray,
    K: np.ndarray,
    T_world_optical: np.ndarray,
    box: tuple[float, float, float, float, float, float],
    deck: float,
    step: int = 8,
) -> tuple[int, int, int, int]:
    """Image rows r0:r1 and columns c0:c1 [px] whose returns can land in the box's footprint:
    every step-th pixel is unprojected (a return below the deck at its deck-plane crossing),
    and the rectangle of those inside is widened by 2 step px."""
    h, w = depth.shape
    x0, x1, y0, y1, _, _ = box
    zc = np.nan_to_num(depth[::step, ::step].astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    u = (np.arange(0, w, step) - K[0, 2]) / K[0, 0]
    v = (np.arange(0, h, step) - K[1, 2]) / K[1, 1]
    R, t = T_world_optical[:3, :3], T_world_optical[:3, 3]
    d = R[:, 0, None, None] * u[None, None, :] + R[:, 1, None, None] * v[None, :, None]
    d = d + R[:, 2, None, None]  # (3, h', w') ray direction per unit planar depth
    zc = np.where(d[2] * zc + t[2] < deck, (deck - t[2]) / np.minimum(d[2], -1e-9), zc)
    px, py = d[0] * zc + t[0], d[1] * zc + t[1]
    ins = (zc > 0) & (px >= x0) & (px < x1) & (py >= y0) & (py < y1)
    if not ins.any():
        return 0, 0, 0, 0
    rows, cols = np.flatnonzero(ins.any(axis=1)), np.flatnonzero(ins.any(axis=0))
    r0 = max(int(rows[0] - 2) * step, 0)
    r1 = min(int(rows[-1] + 3) * step, h)
    c0 = max(int(cols[0] - 2) * step, 0)
    c1 = min(int(cols[-1] + 3) * step, w)
    return r0, r1, c0, c1


def _fill_holes(cells: np.ndarray, obs: np.ndarray, need: int, tol: float) -> None:
    """Fill unobserved cells in place where >= need of 8 neighbours are observed within tol."""
    ny, nx = cells.shape
    H = np.pad(cells, 1)
    Ob = np.pad(obs, 1)
    shifts = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]
    hs = np.stack([H[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in shifts])
    os_ = np.stack([Ob[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in shifts])
    n = os_.sum(axis=0)
    hi = np.where(os_, hs, -np.inf).max(axis=0)
    lo = np.where(os_, hs, np.inf).min(axis=0)
    # Enclosed: observed on both sides along X or along Y. A cell beside a lid whose far side
    # is unseen (the shadow beyond a tall carton) has 5 lid-high neighbours, and filling it
    # grew the lid by a cell.
    k = {s_: i for i, s_ in enumerate(shifts)}
    across = (os_[k[(0, -1)]] & os_[k[(0, 1)]]) | (os_[k[(-1, 0)]] & os_[k[(1, 0)]])
    fill = ~obs & (n >= need) & (hi - lo <= tol) & across
    if fill.any():
        mean = np.where(os_, hs, 0.0).sum(axis=0) / np.maximum(n, 1)
        cells[fill] = mean[fill]
        obs[fill] = True


def _bridge_deck(cells: np.ndarray, obs: np.ndarray, span: int, tol: float) -> None:
    """Mark deck (0, observed) the unobserved cells whose nearest observed cells along X, or
    along Y, are deck-high (<= tol) on both sides within span cells: the gaps between deck
    boards, which the sensor loses whole. Only at deck level: two lids of one height with an
    unseen gap between them stay apart (the gap is lower, not lid-high)."""
    if span <= 0:
        return
    deck = obs & (cells <= tol)
    ny, nx = cells.shape
    fill = np.zeros_like(obs)
    for axis, n in ((0, ny), (1, nx)):
        sides = []
        for sign in (-1, 1):
            hit = np.zeros_like(obs)  # nearest observed cell this way is deck
            found = np.zeros_like(obs)
            for d in range(1, span + 1):
                if d >= n:
                    break
                o = np.zeros_like(obs)
                dk = np.zeros_like(obs)
                src = slice(0, n - d) if sign > 0 else slice(d, n)
                dst = slice(d, n) if sign > 0 else slice(0, n - d)
                idx_s = (src, slice(None)) if axis == 0 else (slice(None), src)
                idx_d = (dst, slice(None)) if axis == 0 else (slice(None), dst)
                o[idx_d] = obs[idx_s]
                dk[idx_d] = deck[idx_s]
                hit |= ~found & dk
                found |= o
            sides.append(hit)
        fill |= sides[0] & sides[1]
    fill &= ~obs
    cells[fill] = 0.0
    obs[fill] = True


def _lid_points(
    view: Any, box: tuple[float, float, float, float, float, float], deck: float
) -> tuple[np.ndarray, np.ndarray]:
    """The view's returns above the deck (more than 2 cm) inside the box's footprint, from
    the depth as the sensor gave it (no median, no edge or normal filter: the filters eat the
    1-2 pixels at every lid edge, which is where a rectangle's extent is read), as world points
    (N, 3) float32 [m], with each return's pixel footprint (N,) [m] (planar depth / fx)."""
    depth = np.asarray(view.depth, dtype=np.float32)
    K = np.asarray(view.K, dtype=np.float64)
    T = np.asarray(view.T_world_optical, dtype=np.float64)
    r0, r1, c0, c1 = _roi(depth, K, T, box, deck)
    z = np.nan_to_num(depth[r0:r1, c0:c1], nan=0.0, posinf=0.0, neginf=0.0)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    rows, cols = np.nonzero(z > 0)
    zz = z[rows, cols]
    a = ((cols + c0 - cx) / fx).astype(np.float32)
    b = ((rows + r0 - cy) / fy).astype(np.float32)
    R = T[:3, :3].astype(np.float32)
    t = T[:3, 3].astype(np.float32)
    P = np.stack([a * zz, b * zz, zz], axis=1) @ R.T + t
    x0, x1, y0, y1, _, z1 = box
    keep = (
        (P[:, 2] > deck + 0.02)
        & (P[:, 2] <= z1)
        & (P[:, 0] >= x0)
        & (P[:, 0] < x1)
        & (P[:, 1] >= y0)
        & (P[:, 1] < y1)
    )
    return P[keep], (zz[keep] / np.float32(fx)).astype(np.float32)


def _fit_lids(
    cells: np.ndarray,
    obs: np.ndarray,
    lid_pts: np.ndarray,
    foot: np.ndarray,
    origin: tuple[float, float],
    deck: float,
    params: FusionParams,
) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Rectangles fitted to the lids: each lid, a connected region of observed cells within
    lid_tol of one height, gets the minimum-area rectangle's axes of the returns within
    lid_band of its height round it (lid_pts (N, 3) [m, world], from the steepest view, foot
    (N,) their pixel footprints [m]) and its extent along them, lid_trim % trimmed off each end
    and widened by lid_widen of a pixel footprint. A rectangle holding cells observed at other
    heights below the lid's, or few of the lid's own or higher ones (a carton standing on it),
    is rejected (two lids merged, a fit thrown by stray returns).

    Returns (height [m], cells whose centre the rectangle holds, cells of the lid) per lid.
    """
    out: list[tuple[float, np.ndarray, np.ndarray]] = []
    if lid_pts.size == 0:
        return out
    ny, nx = cells.shape
    ox, oy = origin
    cs = params.cell
    pix = np.clip(((lid_pts[:, 0] - ox) / cs).astype(np.int64), 0, nx - 1)
    piy = np.clip(((lid_pts[:, 1] - oy) / cs).astype(np.int64), 0, ny - 1)
    pc = piy * nx + pix
    pz = lid_pts[:, 2] - deck
    gx = ox + (np.arange(nx) + 0.5) * cs
    gy = oy + (np.arange(ny) + 0.5) * cs
    k5 = np.ones((5, 5), np.uint8)
    k3 = np.ones((3, 3), np.uint8)
    todo = obs & (cells > 0.02)
    while todo.any():
        iy, ix = np.unravel_index(int(np.argmax(todo)), todo.shape)
        level = (obs & (np.abs(cells - cells[iy, ix]) <= params.lid_tol)).astype(np.uint8)
        _, lab = cv2.connectedComponents(level, connectivity=4)
        comp = lab == lab[iy, ix]
        todo &= ~comp
        if comp.sum() < 4:
            continue
        h = float(np.median(cells[comp]))
        near = cv2.dilate(comp.astype(np.uint8), k5).astype(bool)
        sel = near.reshape(-1)[pc] & (np.abs(pz - h) <= params.lid_band)
        if sel.sum() < 20:
            continue
        xy = lid_pts[sel, :2].astype(np.float32)
        ang = math.radians(cv2.minAreaRect(xy)[2])
        u = np.array([math.cos(ang), math.sin(ang)])
        v = np.array([-u[1], u[0]])
        t = params.lid_trim
        w = params.lid_widen * float(np.median(foot[sel]))
        u0, u1 = np.percentile(xy @ u, (t, 100 - t))
        v0, v1 = np.percentile(xy @ v, (t, 100 - t))
        GU = gx[None, :] * u[0] + gy[:, None] * u[1]
        GV = gx[None, :] * v[0] + gy[:, None] * v[1]
        rin = (GU >= u0 - w) & (GU <= u1 + w) & (GV >= v0 - w) & (GV <= v1 + w)
        n_in = int(rin.sum())
        if n_in == 0:
            continue
        # A carton standing on this one hides part of the lid: cells observed higher are no
        # contradiction, lower ones are (two lids merged round a gap, a fit thrown wide),
        # except on the rectangle's rim, where the oblique views' edge returns land.
        above = obs & (cells > h + params.lid_tol)
        below = obs & ~comp & (cells < h - params.lid_tol)
        core = cv2.erode(rin.astype(np.uint8), k3).astype(bool)
        if (
            int((core & below).sum()) > params.lid_other * n_in
            or int((rin & (comp | above)).sum()) < params.lid_fill * n_in
        ):
            continue
        out.append((h, rin, comp))
    return out


def _complete_edges(
    cells: np.ndarray,
    obs: np.ndarray,
    lids: list[tuple[float, np.ndarray, np.ndarray]],
    params: FusionParams,
) -> None:
    """Observe, in place, the edge cells round the fitted lids (lids = _fit_lids(...)): inside
    a rectangle the highest lid's height; outside every rectangle but within lid_ring of one,
    the height of the observed cells beyond (outside every rectangle) when at least two of the
    8 neighbours are and they agree within fill_tol; the same for the grid's outermost cells
    (the deck's edge, whose normals the footprint edge spoils). A slot between two lids, whose
    floor no camera saw, has only lid cells round it and stays unobserved."""
    top = np.full(cells.shape, -np.inf)
    for h, rin, _ in lids:
        top[rin] = np.maximum(top[rin], h)
    on = np.isfinite(top)
    fill = ~obs & on
    cells[fill] = top[fill]
    obs[fill] = True
    ring_px = max(int(math.ceil(params.lid_ring / params.cell)), 1)
    ring = cv2.dilate(on.astype(np.uint8), np.ones((2 * ring_px + 1,) * 2, np.uint8)).astype(bool)
    # The grid's outermost cells too: the deck's edge loses its normals at the footprint edge.
    border = np.ones_like(ring)
    border[1:-1, 1:-1] = False
    todo = (ring | border) & ~on
    ny, nx = cells.shape
    for _ in range(params.lid_ring_iters):
        if not (todo & ~obs).any():
            break
        H = np.pad(cells, 1)
        Ob = np.pad(obs & ~on, 1)
        hs = np.stack([H[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in _SHIFTS])
        os_ = np.stack([Ob[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in _SHIFTS])
        n = os_.sum(axis=0)
        hi = np.where(os_, hs, -np.inf).max(axis=0)
        lo = np.where(os_, hs, np.inf).min(axis=0)
        add = todo & ~obs & (n >= 2) & (hi - lo <= params.fill_tol)
        if not add.any():
            break
        cells[add] = (np.where(os_, hs, 0.0).sum(axis=0) / np.maximum(n, 1))[add]
        obs[add] = True


_SHIFTS = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]


def _robust_cells(
    c: np.ndarray, z: np.ndarray, ncell: int, nb: int, zlo: float, params: FusionParams
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cell height (ncell,) [m] and point count (ncell,): the mean of the points within
    `band` of the most populated 3-bin height window, refined once around that mean."""
    zb = np.clip(((z - zlo) / params.bin).astype(np.int64), 0, nb - 1)
    # The histogram spans only the bins that hold points (the stack, not the 2 m band): the
    # dense (cells x bins) array is most of the fusion's time.
    b0 = int(zb.min()) if zb.size else 0
    nb = max(int(zb.max()) - b0 + 1 if zb.size else 1, 3)
    zb = zb - b0
    hist = np.bincount(c * nb + zb, minlength=ncell * nb).reshape(ncell, nb)
    win = hist[:, :-2] + hist[:, 1:-1] + hist[:, 2:]
    i = np.argmax(win, axis=1)
    rows = np.arange(ncell)
    # The window's own centroid, not its middle bin's: points all in one edge bin of the
    # window lay 1.5 bins (15 mm, beyond `band`) from the middle, and the cell went unseen.
    h1, h2 = hist[rows, i + 1], hist[rows, i + 2]
    est = zlo + (b0 + i + 0.5 + (h1 + 2.0 * h2) / np.maximum(win[rows, i], 1)) * params.bin
    cnt = np.zeros(ncell, dtype=np.int64)
    for _ in range(2):
        sel = np.abs(z - est[c]) <= params.band
        cnt = np.bincount(c[sel], minlength=ncell)
        tot = np.bincount(c[sel], weights=z[sel], minlength=ncell)
        est = np.where(cnt > 0, tot / np.maximum(cnt, 1), est)
    return est, cnt


def fuse_heightmap(
    views: Sequence[Any],
    params: FusionParams,
    pallet: PalletGeometry | None = None,
    body: RobotBody | None = None,
    q: np.ndarray | None = None,
    held_dims: Sequence[float] | None = None,
) -> FusionResult:
    """One height map from the depth views (CameraView: depth (H, W) [m], K, T_world_optical).

    Points of upward-facing surfaces inside the pallet footprint and the height band are kept;
    with a body and joint positions q (6,) [rad], points inside the inflated arm, gripper and
    held carton (held_dims L x W x H [m]) are dropped. Per cell the estimate is the mean of the
    points within `band` of the cell's most populated height (a mode, robust against flying
    pixels and the noise that biases a maximum upward); cells with fewer than min_points stay
    unobserved (height 0), then small holes are filled where the neighbours agree.
    """
    p = pallet or PalletGeometry()
    cs = params.cell
    ox, oy = p.origin_xy
    nx, ny = round(p.size_xy[0] / cs), round(p.size_xy[1] / cs)
    deck = p.deck_z
    zlo, zhi = deck + params.z_range[0], deck + params.z_range[1]
    box = (ox, ox + nx * cs, oy, oy + ny * cs, zlo, zhi)
    # Steepest view first: a cell takes the estimate of the most downward-looking camera that
    # observed it. A near-vertical ray puts the depth error into the height only, and shows
    # little of the carton sides; an oblique one moves points across carton edges by about
    # the depth error (lid points spill onto the deck beyond), so it only fills what the
    # steeper views could not see.
    order = sorted(views, key=lambda v: float(np.asarray(v.T_world_optical)[2, 2]))
    parts = [_view_points(v, params, box, deck) for v in order]
    sizes = [len(q_) for q_ in parts]
    pts = np.concatenate(parts) if parts else np.zeros((0, 3), np.float32)
    src = np.repeat(np.arange(len(parts)), sizes)
    dropped = 0
    if body is not None and q is not None and len(pts):
        inside = body.contains(pts, np.asarray(q, float), held_dims, params.robot_margin)
        dropped = int(inside.sum())
        if dropped:
            pts, src = pts[~inside], src[~inside]
    ncell = nx * ny
    ix = np.minimum(((pts[:, 0] - ox) / cs).astype(np.int64), nx - 1)
    iy = np.minimum(((pts[:, 1] - oy) / cs).astype(np.int64), ny - 1)
    cell_of = iy * nx + ix
    nb = int(math.ceil((zhi - zlo) / params.bin)) + 2
    fused = np.zeros(ncell)
    seen = np.zeros(ncell, dtype=bool)
    for k in range(len(parts)):
        mine = src == k
        c, z = cell_of[mine], pts[mine, 2]
        if c.size == 0:
            continue
        est, cnt = _robust_cells(c, z, ncell, nb, zlo, params)
        new = ~seen & (cnt >= params.min_points)
        fused[new] = est[new]
        seen |= new
    obs = seen.reshape(ny, nx)
    cells = np.where(obs, np.maximum(fused.reshape(ny, nx) - deck, 0.0), 0.0)
    # Twice: a bridged board gap completes the neighbourhoods of holes next to it.
    for _ in range(2):
        _fill_holes(cells, obs, params.fill_neighbours, params.fill_tol)
        _bridge_deck(cells, obs, params.deck_bridge, params.fill_tol)
    if params.edge_fill and order:
        # The steepest view's returns give the lid edges; those inside the robot are its own.
        lid_pts, foot = _lid_points(order[0], box, deck)
        if body is not None and q is not None and len(lid_pts):
            free = ~body.contains(lid_pts, np.asarray(q, float), held_dims, params.robot_margin)
            lid_pts, foot = lid_pts[free], foot[free]
        lids = _fit_lids(cells, obs, lid_pts, foot, (ox, oy), deck, params)
        _complete_edges(cells, obs, lids, params)
    hm = HeightMap(cells, obs, (ox, oy), cs)
    return FusionResult(hm, np.ascontiguousarray(pts, dtype=np.float32), dropped)


def _project(
    X: np.ndarray, T: np.ndarray, K: np.ndarray, shape: tuple[int, int], pad: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(u, v, planar depth z, inside) of world points X (N, 3) in a camera (T_world_optical,
    K); inside: in front and at least `pad` px inside an image of `shape` (H, W)."""
    pc = (X - T[:3, 3]) @ T[:3, :3]  # R^T (X - t)
    z = pc[:, 2]
    with np.errstate(divide='ignore', invalid='ignore'):
        u = K[0, 0] * pc[:, 0] / z + K[0, 2]
        v = K[1, 1] * pc[:, 1] / z + K[1, 2]
    H, W = shape
    inside = (z > 0) & (u >= pad) & (u < W - 1 - pad) & (v >= pad) & (v < H - 1 - pad)
    return u, v, z, inside


def recall_hidden(
    now: HeightMap,
    prev: HeightMap | None,
    views: Sequence[Any],
    params: FusionParams,
    pallet: PalletGeometry | None = None,
    body: RobotBody | None = None,
    q: np.ndarray | None = None,
    held_dims: Sequence[float] | None = None,
) -> tuple[HeightMap, int]:
    """(map, cells recalled): `now` with the cells it lacks and `prev` (an earlier fusion of the
    same stack) observed, taken from `prev` where the views show them hidden, not changed.

    Cartons are only added to a stack, so most cells that drop out of sight were covered from
    every camera by a carton placed beside them (the floor of a slot between two tall cartons,
    the rim of a lid round the carton standing on it). A persistent map keeps what it saw, as
    occupancy and TSDF maps do. Each camera is asked about the remembered point P (the cell's
    centre at its remembered height) through the depth at P's pixel (the median of the valid
    returns in the 3 x 3 window): deeper than P by more than recall_tol, the camera sees through
    where P was (the cell is lower now; a deck cell excepted, whose board gaps show the floor);
    nearer, something hides it, which tells nothing when it is the robot (the arm may hide a
    change). And each camera is asked about the cell's column above P (sampled every half
    cell): returns from within a quarter cell of the column's axis and recall_tol above P, off
    the robot, are something now standing on the cell (a carton whose lid edge the fusion's
    filters dropped); two pixels must show it, a single one may be a flying pixel. Either
    contradiction leaves the cell out; a cell is recalled when no camera contradicts it and
    at least one camera returned a depth at P's pixel from off the robot.
    """
    if prev is None or not params.recall:
        return now, 0
    if prev.shape != now.shape:
        raise FusionError(f'map shapes differ: now {now.shape}, earlier {prev.shape}')
    obs_now = np.asarray(now.observed)
    todo = np.asarray(prev.observed) & ~obs_now
    if not todo.any():
        return now, 0
    p = pallet or PalletGeometry()
    deck = p.deck_z
    cs = float(now.cell_size)
    iy, ix = np.nonzero(todo)
    P = np.stack(
        [
            now.origin[0] + (ix + 0.5) * cs,
            now.origin[1] + (iy + 0.5) * cs,
            p.deck_z + np.asarray(prev.cells)[iy, ix],
        ],
        axis=1,
    )
    bad = np.zeros(len(P), dtype=bool)
    told = np.zeros(len(P), dtype=bool)
    # The column over each cell, sampled every half cell from recall_tol above P to 5 cm over
    # the highest cell either map observed (a carton standing on the cell shows part of its
    # lid, which the fusion observes): returns found inside it are something standing on it.
    top = max(float(np.max(now.cells)), float(np.max(prev.cells))) + 0.05
    rise = np.arange(params.recall_tol, max(top, 2 * params.recall_tol), cs / 2)
    cols = P[:, None, :] + np.stack(
        [np.zeros_like(rise), np.zeros_like(rise), rise], axis=1
    )  # (N, K, 3)
    hits = [np.zeros((0, 3), np.int64)]
    for n_view, v in enumerate(views):
        T = np.asarray(v.T_world_optical, dtype=np.float64)
        K = np.asarray(v.K, dtype=np.float64)
        depth = np.asarray(v.depth)  # NaN (lost) fails the range tests below
        u, w, z, inside = _project(P, T, K, depth.shape, 1)
        if inside.any():
            k = np.flatnonzero(inside)
            r, c = np.round(w[k]).astype(np.int64), np.round(u[k]).astype(np.int64)
            win = np.stack(
                [depth[r + dr, c + dc] for dr in (-1, 0, 1) for dc in (-1, 0, 1)], axis=1
            ).astype(np.float64)
            valid = (win > params.depth_range[0]) & (win < params.depth_range[1])
            seen = valid.any(axis=1)
            d = np.nanmedian(np.where(valid, win, np.nan)[seen], axis=1)
            k, zk = k[seen], z[k][seen]
            # A return on the robot says nothing of the cell: the arm may hide a change.
            mine = np.zeros(len(k), dtype=bool)
            front = d < zk - params.recall_tol
            if body is not None and q is not None and front.any():
                Qf = T[:3, 3] + (P[k[front]] - T[:3, 3]) * (d[front] / zk[front])[:, None]
                mine[front] = body.contains(
                    Qf, np.asarray(q, float), held_dims, params.robot_margin
                )
            told[k[~mine]] = True
            # Through where P was, unless P is the deck: its board gaps show the floor below.
            raised = P[k, 2] > deck + params.recall_tol
            bad[k[(d > zk + params.recall_tol) & raised]] = True
        # Returns from inside each cell's column, above P.
        X = cols.reshape(-1, 3)
        u, w, z, inside = _project(X, T, K, depth.shape, 0)
        j = np.flatnonzero(inside)
        if j.size == 0:
            continue
        r, c = np.round(w[j]).astype(np.int64), np.round(u[j]).astype(np.int64)
        d = depth[r, c].astype(np.float64)
        ok = (d > params.depth_range[0]) & (d < params.depth_range[1])
        j, d, px = j[ok], d[ok], (r * depth.shape[1] + c)[ok]
        Q = T[:3, 3] + (X[j] - T[:3, 3]) * (d / z[j])[:, None]
        owner = j // len(rise)
        hit = (
            (np.abs(Q[:, 0] - P[owner, 0]) < cs / 4)
            & (np.abs(Q[:, 1] - P[owner, 1]) < cs / 4)
            & (Q[:, 2] > P[owner, 2] + params.recall_tol)
        )
        if hit.any() and body is not None and q is not None:
            on_robot = body.contains(Q[hit], np.asarray(q, float), held_dims, params.robot_margin)
            hit[np.flatnonzero(hit)[on_robot]] = False
        # Pixels (view, index) that returned from inside each column.
        hits.append(np.stack([owner[hit], np.full(hit.sum(), n_view), px[hit]], axis=1))
    # A surface seen by one pixel may be a flying pixel (read between two surfaces): a cell is
    # covered when at least two pixels returned from inside its column.
    seen_in = np.unique(np.concatenate(hits), axis=0)
    covered = np.bincount(seen_in[:, 0], minlength=len(P)) >= 2
    bad |= covered
    keep = told & ~bad
    if not keep.any():
        return now, 0
    cells = np.array(now.cells, dtype=float)
    obs = obs_now.copy()
    cells[iy[keep], ix[keep]] = np.asarray(prev.cells)[iy[keep], ix[keep]]
    obs[iy[keep], ix[keep]] = True
    return HeightMap(cells, obs, now.origin, now.cell_size), int(keep.sum())


class MapMemory:
    """What the fusions of one stack have seen: per cell the height it was last observed at.

    remember(fused, ...) answers the fused map with the cells it lacks recalled from that
    record where the views show them hidden (recall_hidden), then records the cells the fused
    map observed. A cell the views contradict is not answered but stays recorded: a flying
    pixel or the arm passing is not a change, and a change in sight is recorded when seen.
    forget() starts a new stack (an episode).
    """

    def __init__(self, params: FusionParams, pallet: PalletGeometry | None = None) -> None:
        self.params = params
        self.pallet = pallet or PalletGeometry()
        self.seen: HeightMap | None = None
        self.recalled = 0  # cells the last answer took from the record

    def forget(self) -> None:
        self.seen = None
        self.recalled = 0

    def remember(
        self,
        fused: HeightMap,
        views: Sequence[Any],
        body: RobotBody | None = None,
        q: np.ndarray | None = None,
        held_dims: Sequence[float] | None = None,
    ) -> HeightMap:
        out, self.recalled = recall_hidden(
            fused, self.seen, views, self.params, self.pallet, body, q, held_dims
        )
        obs = np.asarray(fused.observed)
        if self.seen is None or self.seen.shape != fused.shape:
            self.seen = fused
        else:
            cells = np.where(obs, np.asarray(fused.cells), np.asarray(self.seen.cells))
            self.seen = HeightMap(
                cells, obs | np.asarray(self.seen.observed), fused.origin, fused.cell_size
            )
        return out


def map_errors(fused: HeightMap, truth: HeightMap) -> dict[str, Any]:
    """Errors of a fused map against the true one: coverage_pct (observed share of the grid
    [%]), errors (absolute height errors [m] over the fused map's observed cells), and their
    median_mm and p99_mm."""
    if fused.shape != truth.shape:
        raise FusionError(f'map shapes differ: fused {fused.shape}, truth {truth.shape}')
    obs = np.asarray(fused.observed)
    err = np.abs(np.asarray(fused.cells)[obs] - np.asarray(truth.cells)[obs])
    return {
        'coverage_pct': 100.0 * float(obs.mean()),
        'errors': err,
        'median_mm': 1000.0 * float(np.median(err)) if err.size else 0.0,
        'p99_mm': 1000.0 * float(np.percentile(err, 99)) if err.size else 0.0,
    }
