"""Cartons as MuJoCo free bodies: their MJCF and a handle that reads and drives one after compile."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import mujoco
import numpy as np

from palletizer.core.contracts import floats3
from palletizer.core.errors import PalletizerError

__all__ = [
    'CARTON_CLASS',
    'CartonHandle',
    'CartonLike',
    'SceneError',
    'box_inertia',
    'carton_body_xml',
    'carton_default_xml',
    'carton_names',
    'yaw_quat',
]

CARTON_CLASS = 'carton'


class SceneError(PalletizerError):
    """The compiled model lacks a body, joint, geom or site this code expects by name."""


# Collision bits (docs/levels.md §1.2): cartons 1, arm 2, furniture 3. MuJoCo pairs collide when
# (contype_a & conaffinity_b) | (contype_b & conaffinity_a) != 0, so cartons meet cartons,
# furniture and the pallet but never the arm.
_CARTON_BITS = 1
# Geom group 1: viewer key 1 hides cartons, offscreen renderers still draw groups 0-2.
_CARTON_GROUP = 1
# Sites are bookkeeping only; group 5 keeps them out of every render.
_SITE_GROUP = 5


class CartonLike(Protocol):
    """What the sim needs from a carton draw (palletizer.core.loads.CartonDraw satisfies it)."""

    @property
    def index(self) -> int: ...
    @property
    def package_id(self) -> str: ...
    @property
    def dims(self) -> tuple[float, float, float]: ...
    @property
    def mass(self) -> float: ...
    @property
    def cog_offset(self) -> tuple[float, float, float]: ...
    @property
    def rgba(self) -> tuple[float, float, float, float]: ...
    @property
    def friction(self) -> tuple[float, float, float]: ...


@dataclass(frozen=True)
class CartonNames:
    """MJCF names of carton `index` (docs/levels.md §1.2)."""

    body: str
    joint: str
    geom: str
    lid: str


def carton_names(index: int) -> CartonNames:
    """Body, joint, geom and lid-site names of carton `index`."""
    return CartonNames(
        body=f'package_{index}',
        joint=f'package_joint_{index}',
        geom=f'package_geom_{index}',
        lid=f'package_lid_{index}',
    )


def box_inertia(mass: float, dims: tuple[float, float, float]) -> tuple[float, float, float]:
    """Principal inertia [kg m^2] of a solid box of full `dims` (L, W, H) [m] and `mass` [kg]."""
    length, width, height = dims
    return (
        mass * (width**2 + height**2) / 12.0,
        mass * (length**2 + height**2) / 12.0,
        mass * (length**2 + width**2) / 12.0,
    )


def yaw_quat(yaw: float) -> tuple[float, float, float, float]:
    """Quaternion (w, x, y, z) of a rotation by `yaw` [rad] about world Z."""
    return (math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0))


def _fmt(values: Iterable[float]) -> str:
    return ' '.join(f'{float(v):.10g}' for v in values)


def carton_default_xml() -> str:
    """The `<default class="carton">` block every scene holding cartons must declare."""
    return (
        f'<default class="{CARTON_CLASS}">'
        f'<geom type="box" density="0" contype="{_CARTON_BITS}" conaffinity="{_CARTON_BITS}" '
        f'group="{_CARTON_GROUP}"/>'
        '</default>'
    )


def carton_body_xml(
    draw: CartonLike,
    pos: tuple[float, float, float] | np.ndarray,
    quat: tuple[float, float, float, float] | np.ndarray = (1.0, 0.0, 0.0, 0.0),
) -> str:
    """Worldbody MJCF of one free carton whose geometric centre is at `pos` [m], turned by `quat`.

    The box geom stays centred; the true CoG is an explicit inertial at `cog_offset` with the
    inertia of a solid box, so the wrist gauge and the stack feel the offset the draw declares.
    """
    names = carton_names(draw.index)
    half = [d / 2.0 for d in draw.dims]
    inertia = box_inertia(draw.mass, draw.dims)
    return (
        f'<body name="{names.body}" pos="{_fmt(pos)}" quat="{_fmt(quat)}">'
        f'<freejoint name="{names.joint}"/>'
        f'<inertial pos="{_fmt(draw.cog_offset)}" mass="{draw.mass:.6g}" '
        f'diaginertia="{_fmt(inertia)}"/>'
        f'<geom name="{names.geom}" class="{CARTON_CLASS}" type="box" size="{_fmt(half)}" '
        f'density="0" contype="{_CARTON_BITS}" conaffinity="{_CARTON_BITS}" '
        f'group="{_CARTON_GROUP}" rgba="{_fmt(draw.rgba)}" friction="{_fmt(draw.friction)}"/>'
        f'<site name="{names.lid}" pos="0 0 {half[2]:.6g}" size="0.005" group="{_SITE_GROUP}"/>'
        f'{label_xml(draw, half)}'
        '</body>'
    )


# [m] Half the thickness a label patch stands proud of its face (a paper label is ~0.1 mm;
# thicker keeps it clear of the face in the depth buffer at the cameras' range).
_LABEL_HALF_T = 0.0004
LABEL_RGBA = (0.95, 0.95, 0.92, 1.0)


def label_xml(draw: CartonLike, half: Sequence[float]) -> str:
    """The visual-only patch of the carton's label on its label face (CartonDraw.label), or ''.

    It has no contact and no mass: the carton's inertial is explicit, so the patch changes only
    what the cameras see."""
    face = getattr(draw, 'label', '')
    if not face:
        return ''
    w, h = getattr(draw, 'label_size', (0.0, 0.0))
    sign = 1.0 if face[0] == '+' else -1.0
    t = _LABEL_HALF_T
    if face[1] == 'x':
        pos, size = (sign * (half[0] + t), 0.0, 0.0), (t, w / 2, h / 2)
    else:
        pos, size = (0.0, sign * (half[1] + t), 0.0), (w / 2, t, h / 2)
    return (
        f'<geom name="{carton_names(draw.index).geom}_label" type="box" pos="{_fmt(pos)}" '
        f'size="{_fmt(size)}" contype="0" conaffinity="0" density="0" '
        f'group="{_CARTON_GROUP}" rgba="{_fmt(LABEL_RGBA)}"/>'
    )


@dataclass(frozen=True)
class CartonHandle:
    """Compiled ids of one carton and the measurements the sources take of it.

    The body origin is the geometric centre (the inertial carries the CoG offset).
    """

    index: int
    dims: tuple[float, float, float]
    body: int
    qpos: int
    dof: int
    geom: int
    lid: int

    @classmethod
    def bind(
        cls, model: mujoco.MjModel, index: int, dims: tuple[float, float, float]
    ) -> CartonHandle:
        """Resolve the ids of carton `index` in a compiled model."""
        names = carton_names(index)
        ids = {}
        for kind, name in (
            (mujoco.mjtObj.mjOBJ_BODY, names.body),
            (mujoco.mjtObj.mjOBJ_JOINT, names.joint),
            (mujoco.mjtObj.mjOBJ_GEOM, names.geom),
            (mujoco.mjtObj.mjOBJ_SITE, names.lid),
        ):
            obj = mujoco.mj_name2id(model, kind, name)
            if obj < 0:
                raise SceneError(
                    f'carton {index}: {name!r} is not in the compiled model; '
                    'build the scene with carton_body_xml()'
                )
            ids[kind] = obj
        joint = ids[mujoco.mjtObj.mjOBJ_JOINT]
        return cls(
            index=index,
            dims=floats3(dims),
            body=ids[mujoco.mjtObj.mjOBJ_BODY],
            qpos=int(model.jnt_qposadr[joint]),
            dof=int(model.jnt_dofadr[joint]),
            geom=ids[mujoco.mjtObj.mjOBJ_GEOM],
            lid=ids[mujoco.mjtObj.mjOBJ_SITE],
        )

    def position(self, data: mujoco.MjData) -> np.ndarray:
        """Geometric centre in world [m], shape (3,)."""
        return data.xpos[self.body].copy()

    def rotation(self, data: mujoco.MjData) -> np.ndarray:
        """World rotation of the carton frame, shape (3, 3)."""
        return data.xmat[self.body].reshape(3, 3).copy()

    def lid_position(self, data: mujoco.MjData) -> np.ndarray:
        """Lid centre in world [m], shape (3,)."""
        return data.site_xpos[self.lid].copy()

    def lid_speed(self, model: mujoco.MjModel, data: mujoco.MjData) -> float:
        """Linear speed of the lid centre [m/s]: what a camera tracking the lid would see."""
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, self.lid, vel, 0)
        return float(np.linalg.norm(vel[3:]))

    def tilt(self, data: mujoco.MjData) -> float:
        """Angle between the carton's Z axis and world Z [rad]."""
        return float(math.acos(max(-1.0, min(1.0, data.xmat[self.body][8]))))

    def half_extents(self, data: mujoco.MjData) -> np.ndarray:
        """Half size of the world axis-aligned box around the carton [m], shape (3,)."""
        rot = data.xmat[self.body].reshape(3, 3)
        return np.abs(rot) @ (np.asarray(self.dims) / 2.0)

    def top(self, data: mujoco.MjData) -> float:
        """Height of the carton's highest point [m]."""
        return float(data.xpos[self.body][2] + self.half_extents(data)[2])

    def bottom_corners(self, data: mujoco.MjData) -> np.ndarray:
        """World corners of the carton's bottom face [m], shape (4, 3)."""
        rot = data.xmat[self.body].reshape(3, 3)
        length, width, height = self.dims
        local = np.array(
            [[sx * length / 2, sy * width / 2, -height / 2] for sx in (-1, 1) for sy in (-1, 1)]
        )
        return data.xpos[self.body] + local @ rot.T

    def set_velocity_x(self, data: mujoco.MjData, speed: float) -> None:
        """Set the world x-velocity [m/s] of the carton origin: what a belt under it imposes."""
        data.qvel[self.dof] = speed

    def set_pose(
        self, data: mujoco.MjData, pos: np.ndarray | tuple[float, ...], quat: np.ndarray | tuple
    ) -> None:
        """Place the carton at rest at `pos` [m] / `quat`; staging only, never during an episode."""
        data.qpos[self.qpos : self.qpos + 3] = pos
        data.qpos[self.qpos + 3 : self.qpos + 7] = quat
        data.qvel[self.dof : self.dof + 6] = 0.0
