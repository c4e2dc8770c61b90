"""Depth sensor model: what an active stereo camera returns instead of the renderer's exact depth.

Applied by Cell.capture to every depth image it returns. Effects, in the order applied:
lost returns at depth discontinuities (some become flying pixels between the two surfaces),
lost returns at grazing incidence, axial noise growing with the square of the distance,
range limits, and quantisation to the sensor's depth unit. The random draws are keyed by
(cell seed, physics step, camera name), so a capture at a given instant is the same however
many captures came before it (as WrenchSensor.read keys its noise).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import overload

import cv2
import numpy as np

from palletizer.core.config.cell import DepthNoiseConfig
from palletizer.core.errors import PalletizerError

__all__ = ['DepthNoise', 'DepthNoiseError', 'apply_depth_noise', 'noise_key']


class DepthNoiseError(PalletizerError):
    """A depth noise setting outside its valid range."""


@dataclass(frozen=True)
class DepthNoise:
    """An active stereo depth sensor's error figures.

    Defaults: Intel RealSense D415 (Intel RealSense D400 Series Product Family Datasheet:
    baseline 55 mm, depth 1280 x 720 with 65 x 40 deg FOV, Min-Z 0.45 m at that resolution,
    range to ~10 m, depth unit 1 mm). Axial RMS error after Intel's "Tuning depth cameras for best
    performance" whitepaper: sigma = z^2 * subpixel / (focal_px * baseline), subpixel ~0.08.

    focal_px is the sensor's own depth focal length at its native 1280 x 720 (640 / tan(32.5 deg)
    = 1004.6 px): the error comes from the sensor's disparity matching, not from the resolution
    the simulator renders at, so a 640 x 480 render keeps the sensor's figure.
    """

    sensor: str = 'Intel RealSense D415'
    focal_px: float = 1004.6  # [px] native depth focal length
    baseline_m: float = 0.055  # [m]
    subpixel: float = 0.08  # [px] RMS disparity error
    depth_unit_m: float = 0.001  # [m] output quantisation
    min_z_m: float = 0.45  # [m] closer returns are lost
    max_z_m: float = 10.0  # [m] farther returns are lost
    # Incidence (view ray vs surface normal) [deg] where returns start to be lost and where all
    # are lost: the probability rises linearly between the two.
    grazing_deg: tuple[float, float] = (70.0, 85.0)
    # A pixel next to a depth step (second difference) over edge_jump * z is on an edge; it
    # is lost with probability edge_drop, becomes a flying pixel (a depth between the near and
    # far surface) with probability flying, else keeps its depth.
    edge_jump: float = 0.02
    edge_drop: float = 0.5
    flying: float = 0.1

    def __post_init__(self) -> None:
        for name in ('focal_px', 'baseline_m', 'depth_unit_m', 'max_z_m'):
            if not getattr(self, name) > 0:
                raise DepthNoiseError(
                    f'depth_noise.{name} = {getattr(self, name)!r}; expected > 0'
                )
        if self.subpixel < 0 or self.min_z_m < 0 or self.edge_jump <= 0:
            raise DepthNoiseError(
                f'depth_noise: subpixel {self.subpixel!r}, min_z_m {self.min_z_m!r} must be >= 0 '
                f'and edge_jump {self.edge_jump!r} > 0'
            )
        lo, hi = self.grazing_deg
        if not 0 <= lo < hi <= 90:
            raise DepthNoiseError(
                f'depth_noise.grazing_deg = {self.grazing_deg!r}; expected 0 <= start < end <= 90'
            )
        if not (0 <= self.edge_drop and 0 <= self.flying and self.edge_drop + self.flying <= 1):
            raise DepthNoiseError(
                f'depth_noise: edge_drop {self.edge_drop!r} + flying {self.flying!r} must lie in '
                '[0, 1]'
            )

    @classmethod
    def from_config(cls, cfg: DepthNoiseConfig | None) -> DepthNoise | None:
        """From a camera's `depth_noise` in configs/cell.yaml; None (absent): ideal."""
        if cfg is None:
            return None
        return cls(
            sensor=cfg.sensor,
            focal_px=cfg.focal_px,
            baseline_m=cfg.baseline_m,
            subpixel=cfg.subpixel,
            depth_unit_m=cfg.depth_unit_m,
            min_z_m=cfg.min_z_m,
            max_z_m=cfg.max_z_m,
            edge_jump=cfg.edge_jump,
            edge_drop=cfg.edge_drop,
            flying=cfg.flying,
            grazing_deg=cfg.grazing_deg,
        )

    @overload
    def sigma(self, z: np.ndarray) -> np.ndarray: ...
    @overload
    def sigma(self, z: float) -> float: ...
    def sigma(self, z: np.ndarray | float) -> np.ndarray | float:
        """Axial RMS error [m] at planar depth z [m]."""
        return np.square(z) * (self.subpixel / (self.focal_px * self.baseline_m))


def noise_key(seed: int, step: int, camera: str) -> list[int]:
    """Seed sequence of one capture: (cell seed, physics step, CRC-32 of the camera name)."""
    return [int(seed) & 0xFFFFFFFF, int(step), zlib.crc32(camera.encode())]


def _incidence_cos(depth: np.ndarray, fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """|cos| of the angle between each pixel's view ray and the surface normal, (H, W).

    The normal is the cross product of the central differences of the unprojected points
    along u and v; border pixels get 1 (no evidence of a grazing surface).
    """
    h, w = depth.shape
    a = ((np.arange(w, dtype=np.float32) - cx) / fx)[None, :]
    b = ((np.arange(h, dtype=np.float32) - cy) / fy)[:, None]
    z = depth
    X, Y = z * a, z * b
    out = np.ones_like(z)
    # dP/du and dP/dv over two pixels (central differences), inner pixels only.
    ux = X[1:-1, 2:] - X[1:-1, :-2]
    uy = Y[1:-1, 2:] - Y[1:-1, :-2]
    uz = z[1:-1, 2:] - z[1:-1, :-2]
    vx = X[2:, 1:-1] - X[:-2, 1:-1]
    vy = Y[2:, 1:-1] - Y[:-2, 1:-1]
    vz = z[2:, 1:-1] - z[:-2, 1:-1]
    nx = uy * vz - uz * vy
    ny = uz * vx - ux * vz
    nz = ux * vy - uy * vx
    px, py, pz = X[1:-1, 1:-1], Y[1:-1, 1:-1], z[1:-1, 1:-1]
    dot = np.abs(nx * px + ny * py + nz * pz)
    norm = np.sqrt((nx * nx + ny * ny + nz * nz) * (px * px + py * py + pz * pz))
    with np.errstate(invalid='ignore', divide='ignore'):
        c = np.where(norm > 0, dot / norm, 1.0)
    out[1:-1, 1:-1] = c
    return out


def apply_depth_noise(
    depth: np.ndarray,
    noise: DepthNoise,
    K: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """The sensor's reading of a rendered planar depth image.

    depth: (H, W) planar camera Z [m] as rendered; K: (3, 3) camera matrix of the render [px].
    Returns a new (H, W) float32 image [m]; 0 marks a lost return.
    """
    z = np.asarray(depth, dtype=np.float32)
    h, w = z.shape
    fx, fy, cx, cy = float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])
    kernel = np.ones((3, 3), np.uint8)
    zmax = cv2.dilate(z, kernel)
    zmin = cv2.erode(z, kernel)
    # A discontinuity, not a steep ramp: the second difference along u or v jumps, marked on
    # both sides of the step (a slanted surface is left to the grazing rule).
    d2 = np.zeros_like(z)
    d2[:, 1:-1] = np.abs(z[:, 2:] + z[:, :-2] - 2.0 * z[:, 1:-1])
    d2[1:-1, :] = np.maximum(d2[1:-1, :], np.abs(z[2:, :] + z[:-2, :] - 2.0 * z[1:-1, :]))
    edge = cv2.dilate(d2, kernel) > noise.edge_jump * z
    u_edge = rng.random((h, w), dtype=np.float32)
    u_graze = rng.random((h, w), dtype=np.float32)
    t_fly = rng.uniform(0.1, 0.9, (h, w)).astype(np.float32)
    gauss = rng.standard_normal((h, w), dtype=np.float32)

    out = z.copy()
    fly = edge & (u_edge >= noise.edge_drop) & (u_edge < noise.edge_drop + noise.flying)
    out[fly] = zmin[fly] + t_fly[fly] * (zmax[fly] - zmin[fly])
    lost = edge & (u_edge < noise.edge_drop)

    cos_inc = _incidence_cos(z, fx, fy, cx, cy)
    lo, hi = (math.cos(math.radians(a)) for a in noise.grazing_deg)  # lo > hi
    p_lost = np.clip((lo - cos_inc) / (lo - hi), 0.0, 1.0)
    lost |= ~edge & (u_graze < p_lost)

    out += gauss * noise.sigma(out).astype(np.float32)
    lost |= (out < noise.min_z_m) | (out > noise.max_z_m) | ~np.isfinite(out)
    out = np.round(out / noise.depth_unit_m) * noise.depth_unit_m
    out[lost] = 0.0
    return out.astype(np.float32, copy=False)
