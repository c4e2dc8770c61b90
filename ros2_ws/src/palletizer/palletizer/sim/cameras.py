"""Cell cameras: the pallet rig, the pick-station camera and photo views; RGB and planar depth frames."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from palletizer.core.config.cell import CameraConfig
from palletizer.core.errors import PalletizerError, close_match

__all__ = [
    'CAMERAS',
    'CameraError',
    'CameraRig',
    'CameraSpec',
    'Frame',
    'Intrinsics',
    'camera_specs',
    'cameras_xml',
    'look_at_quat',
]


class CameraError(PalletizerError):
    """An unknown camera name or an unusable resolution."""


@dataclass(frozen=True)
class CameraSpec:
    """A camera by position and look-at [m], vertical field of view [deg]."""

    name: str
    pos: tuple[float, float, float]
    look_at: tuple[float, float, float]
    fovy_deg: float
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)
    role: str = 'pallet'  # pallet | pick | photo


def camera_specs(cameras: Mapping[str, CameraConfig]) -> tuple[CameraSpec, ...]:
    """CameraSpecs from configs/cell.yaml `cameras` (Config.cell.cameras), in file order."""
    return tuple(
        CameraSpec(name, c.pos, c.look_at, c.fovy_deg, c.up or (0.0, 0.0, 1.0), c.role)
        for name, c in cameras.items()
    )


def _configured() -> tuple[CameraSpec, ...]:
    # Only the cameras block: importing the simulator must not depend on the other sections
    # (load_config validates the whole file wherever a run starts).
    from palletizer.core.config import load_cameras

    return camera_specs(load_cameras())


# The cameras of configs/cell.yaml (docs/cell.md §3.7 started it; the file says why each pallet
# camera sits where it does). The top camera uses up = +Y so that its image is not turned
# 90 deg against the UI.
CAMERAS: tuple[CameraSpec, ...] = _configured()


def _look_at_matrix(spec: CameraSpec) -> np.ndarray:
    """R_world_cam (3, 3) of a MuJoCo camera: it looks along its -Z with +Y up."""
    pos = np.asarray(spec.pos, dtype=float)
    z = pos - np.asarray(spec.look_at, dtype=float)
    z /= np.linalg.norm(z)
    x = np.cross(np.asarray(spec.up, dtype=float), z)
    if np.linalg.norm(x) < 1e-9:
        raise CameraError(f'camera {spec.name!r}: up {spec.up} is parallel to the view direction')
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


def look_at_quat(spec: CameraSpec) -> np.ndarray:
    """Quaternion (w, x, y, z) of the camera frame in the world."""
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, _look_at_matrix(spec).ravel())
    return q


def cameras_xml(specs: Iterable[CameraSpec] = CAMERAS) -> str:
    """Worldbody XML: one camera and one site `cam_{name}` per spec (same pose)."""
    out = []
    for s in specs:
        q = ' '.join(f'{v:.10g}' for v in look_at_quat(s))
        p = ' '.join(f'{v:.10g}' for v in s.pos)
        out.append(f'    <camera name="{s.name}" pos="{p}" quat="{q}" fovy="{s.fovy_deg:.10g}"/>')
        out.append(f'    <site name="cam_{s.name}" pos="{p}" quat="{q}" size="0.02" group="4"/>')
    return '\n'.join(out)


@dataclass(frozen=True)
class Intrinsics:
    """Ideal pinhole from fovy [px]: fy = H / (2 tan(fovy/2)), fx = fy, centre ((W-1)/2, (H-1)/2)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @property
    def K(self) -> np.ndarray:
        """Camera matrix (3, 3)."""
        return np.array([[self.fx, 0, self.cx], [0, self.fy, self.cy], [0, 0, 1.0]])


@dataclass(frozen=True)
class Frame:
    """One camera capture.

    rgb: (H, W, 3) uint8 or None; depth: (H, W) float32 planar camera Z [m] (32FC1) or None.
    T_world_optical: (4, 4) pose of the optical frame (x right, y down, z forward) in the world.
    """

    name: str
    time: float
    rgb: np.ndarray | None
    depth: np.ndarray | None
    intrinsics: Intrinsics
    T_world_optical: np.ndarray


class CameraRig:
    """Renders the model's cameras, reusing one renderer per resolution. Call close() when done."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self._model = model
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self._names = [model.camera(i).name for i in range(model.ncam)]

    @property
    def names(self) -> tuple[str, ...]:
        """Camera names in model order."""
        return tuple(self._names)

    def intrinsics(self, name: str, width: int, height: int) -> Intrinsics:
        """Intrinsics of camera `name` at a resolution [px]."""
        cam = self._camera(name)
        fovy = np.deg2rad(float(self._model.cam_fovy[cam.id]))
        fy = height / (2.0 * np.tan(fovy / 2.0))
        fy = float(fy)
        return Intrinsics(width, height, fy, fy, (width - 1) / 2.0, (height - 1) / 2.0)

    def pose(self, name: str, data: mujoco.MjData) -> np.ndarray:
        """T_world_optical (4, 4): MuJoCo's camera frame with y and z flipped."""
        cam = self._camera(name)
        T = np.eye(4)
        T[:3, :3] = data.cam_xmat[cam.id].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
        T[:3, 3] = data.cam_xpos[cam.id]
        return T

    def capture(
        self,
        data: mujoco.MjData,
        names: Iterable[str],
        width: int = 640,
        height: int = 480,
        *,
        rgb: bool = True,
        depth: bool = True,
    ) -> dict[str, Frame]:
        """Render the named cameras at (width, height); depth is planar Z in metres."""
        names = list(names)
        for n in names:
            self._camera(n)
        off_w, off_h = self._model.vis.global_.offwidth, self._model.vis.global_.offheight
        if not (0 < width <= off_w and 0 < height <= off_h):
            raise CameraError(
                f'resolution {width}x{height} is outside 1..{off_w} x 1..{off_h} '
                '(the model offscreen buffer)'
            )
        r = self._renderer(width, height)
        out: dict[str, Frame] = {}
        for n in names:
            img = dep = None
            if rgb:
                r.disable_depth_rendering()
                r.update_scene(data, camera=n)
                img = r.render().copy()
            if depth:
                r.enable_depth_rendering()
                r.update_scene(data, camera=n)
                dep = r.render().astype(np.float32, copy=True)
                r.disable_depth_rendering()
            out[n] = Frame(
                n,
                float(data.time),
                img,
                dep,
                self.intrinsics(n, width, height),
                self.pose(n, data),
            )
        return out

    def close(self) -> None:
        """Release every GL context (they leak otherwise: mujoco-notes)."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()

    def _renderer(self, width: int, height: int) -> mujoco.Renderer:
        key = (width, height)
        if key not in self._renderers:
            self._renderers[key] = mujoco.Renderer(self._model, height=height, width=width)
        return self._renderers[key]

    def _camera(self, name: str) -> Any:
        if name not in self._names:
            raise CameraError(
                f'camera {name!r} does not exist; cameras: {", ".join(self._names)}'
                + close_match(name, self._names)
            )
        return self._model.camera(name)
