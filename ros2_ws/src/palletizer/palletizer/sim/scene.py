"""Scene assembly: floor, robot on its pedestal, gripper, pallet, a source, cartons, lights.

The robot comes from its MJCF files (sim/models/ur10e.xml, sim/models/vgp20.xml): the scene MJCF
declares the arm as an `<attach>` of ur10e.xml first in its world body, and `scene_spec` finishes
it through MuJoCo's MjSpec API (sim/robot.py `mount_robot`: ArmParams values, the gripper at the
flange with GripperParams values). `build_scene_spec` does both; `compile_scene` compiles a spec.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from xml.sax.saxutils import escape

import mujoco

from palletizer.core.config.cell import TableConfig
from palletizer.core.errors import PalletizerError
from palletizer.sim.cameras import CAMERAS, CameraSpec, cameras_xml
from palletizer.sim.gripper import GripperParams
from palletizer.sim.pallet import PalletParams, beam_xml, pallet_equality_xml, pallet_xml
from palletizer.sim.plant import PLANT_HEADLIGHT, plant_xml
from palletizer.sim.robot import ARM_MODEL, ARM_PREFIX, UR10E_XML, ArmParams, mount_robot
from palletizer.sim.wrench import ft_sensors_xml

__all__ = [
    'AuxTableParams',
    'CartonPlacement',
    'SceneError',
    'SceneOptions',
    'build_scene_spec',
    'build_scene_xml',
    'compile_scene',
    'package_indices',
    'scene_spec',
]


class SceneError(PalletizerError):
    """The scene did not compile, or MuJoCo warned while compiling or stepping it."""


class _CartonLike(Protocol):
    index: int
    package_id: str
    dims: tuple[float, float, float]
    mass: float
    cog_offset: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    friction: tuple[float, float, float]


class _SceneSource(Protocol):
    def scenery_xml(self) -> str: ...
    def cartons_xml(self) -> str: ...


@dataclass(frozen=True)
class CartonPlacement:
    """A carton placed directly in the scene: draw-like record, position [m], quat (w x y z)."""

    draw: Any
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class AuxTableParams:
    """The auxiliary table beside the pallet (configs/cell.yaml `tables.auxiliary`), where the
    set-aside buffer puts cartons down: top centre xy [m], half sizes of the top slab [m], top
    height [m], friction; on four legs of half side `leg` [m]."""

    centre: tuple[float, float] = (-0.37, -0.10)
    half_size: tuple[float, float, float] = (0.25, 0.33, 0.04)
    top: float = 0.58
    friction: tuple[float, float, float] = (0.9, 0.01, 0.001)
    leg: float = 0.03

    @classmethod
    def from_config(cls, aux: TableConfig) -> AuxTableParams:
        """From cell.yaml `tables.auxiliary` (centre, half_size, top, friction)."""
        return cls(centre=aux.centre, half_size=aux.half_size, top=aux.top, friction=aux.friction)


def aux_table_xml(t: AuxTableParams) -> str:
    """The auxiliary table: a solid top slab and four legs (touch cartons and the arm)."""
    (cx, cy), (hx, hy, hz), top = t.centre, t.half_size, t.top
    fr = _fmt(t.friction)
    rgba = '0.55 0.52 0.48 1'
    out = [
        f'    <geom name="auxiliary_table_top" class="solid" type="box" '
        f'pos="{_fmt((cx, cy, top - hz))}" size="{_fmt((hx, hy, hz))}" friction="{fr}" '
        f'rgba="{rgba}"/>'
    ]
    lh = (top - 2 * hz) / 2
    for k, (sx, sy) in enumerate(((-1, -1), (-1, 1), (1, -1), (1, 1))):
        x, y = cx + sx * (hx - t.leg), cy + sy * (hy - t.leg)
        out.append(
            f'    <geom name="auxiliary_table_leg_{k}" class="solid" type="box" '
            f'pos="{_fmt((x, y, lh))}" size="{_fmt((t.leg, t.leg, lh))}" rgba="{rgba}"/>'
        )
    return '\n'.join(out)


@dataclass(frozen=True)
class SceneOptions:
    """Physics and model parameters of the cell; defaults from configs/cell.yaml `physics`."""

    timestep: float = 0.002
    integrator: str = 'implicitfast'
    cone: str = 'elliptic'  # creeps less and runs faster with 20 cartons (mujoco-notes)
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    arm: ArmParams = ArmParams()
    gripper: GripperParams = GripperParams()
    pallet: PalletParams = PalletParams()
    cameras: tuple[CameraSpec, ...] = field(default_factory=lambda: CAMERAS)
    aux_table: AuxTableParams = AuxTableParams()
    # Suction weld stiffness: 2 x timestep; measured slip < 0.05 mm at 2 m/s^2 with 5 kg
    # (mujoco-notes "Suction").
    suction_solref: tuple[float, float] = (0.004, 1.0)
    # MuJoCo 4 island sleeping: bodies at rest stop costing solver time until touched. Opt-in:
    # a settled 20-carton stack ran 21.6 us/step asleep vs 124 us awake (bench_cell).
    sleep: bool = False


_PACKAGE_RE = re.compile(r'<body\b[^>]*\bname="package_(\d+)"')


def package_indices(xml: str) -> list[int]:
    """Indices i of every `package_{i}` body declared in `xml`, ascending."""
    return sorted({int(m) for m in _PACKAGE_RE.findall(xml)})


def _fmt(v: Sequence[float]) -> str:
    return ' '.join(f'{float(x):.10g}' for x in v)


def _carton_xml(
    draw: _CartonLike,
    pos: tuple[float, float, float],
    quat: tuple[float, float, float, float],
) -> str:
    """A carton body following the sim layout contract (sim/cartons.py provides the real one)."""
    try:
        from palletizer.sim.cartons import carton_body_xml
    except ImportError:
        pass
    else:
        return carton_body_xml(draw, pos, quat)
    i = draw.index
    L, W, H = draw.dims
    m = draw.mass
    inertia = (m * (W * W + H * H) / 12, m * (L * L + H * H) / 12, m * (L * L + W * W) / 12)
    return f"""
    <body name="package_{i}" pos="{_fmt(pos)}" quat="{_fmt(quat)}">
      <joint name="package_joint_{i}" type="free"/>
      <inertial pos="{_fmt(draw.cog_offset)}" mass="{m:.10g}" diaginertia="{_fmt(inertia)}"/>
      <geom name="package_geom_{i}" class="carton" size="{_fmt((L / 2, W / 2, H / 2))}"
            rgba="{_fmt(draw.rgba)}" friction="{_fmt(draw.friction)}"/>
      <site name="package_lid_{i}" pos="0 0 {H / 2:.10g}" size="0.005" group="4"/>
    </body>"""


def _defaults_xml(opts: SceneOptions) -> str:
    # The arm's and the gripper's classes come with their MJCF files (sim/models/).
    return """
  <default>
    <default class="solid">
      <!-- furniture and pallet: touch cartons (1) and the arm (2) -->
      <geom contype="3" conaffinity="3" group="0" friction="0.9 0.01 0.001"/>
    </default>
    <default class="carton">
      <!-- cartons touch cartons, furniture and the pallet, never the arm (docs/levels.md §1.2) -->
      <geom type="box" contype="1" conaffinity="1" group="1" density="0"
            friction="0.95 0.01 0.001"/>
    </default>
    <default class="decor">
      <geom contype="0" conaffinity="0" group="2" density="0"/>
    </default>
  </default>"""


def _lights_xml() -> str:
    # Cell decor lighting of the reference rig (docs/cell.md §3.8): overhead directional, spot over
    # the pick station and a shallow fill that lifts the side view without saturating the top.
    return """
    <light name="overhead" directional="true" pos="0.60 -0.40 4.00" dir="0 0 -1"
           diffuse="0.35 0.35 0.35" castshadow="false"/>
    <light name="station_spot" pos="-0.20 -0.66 2.20" dir="0 0 -1" diffuse="0.35 0.35 0.35"
           castshadow="false"/>
    <light name="fill" directional="true" pos="0 0 3" dir="-0.55 0.62 -0.28"
           diffuse="1.10 1.10 1.12" castshadow="false"/>"""


def build_scene_xml(
    source: _SceneSource | None = None,
    cartons: Sequence[CartonPlacement] = (),
    options: SceneOptions = SceneOptions(),
    decor: str = 'cell',
) -> str:
    """The cell MJCF: robot first (so the `home` key covers its joints), then the world.

    The arm is an `<attach>` of sim/models/ur10e.xml (names prefixed `ur10e/`) and the gripper
    is not in the text: compile the scene from `scene_spec(xml, arm, gripper)`, which finishes
    the robot with the config values (or use build_scene_spec).

    `decor` 'plant' (level 34) replaces the cell's lights with the industrial hall's and adds
    its non-colliding scenery; physics is unchanged.

    `source` contributes its furniture and cartons; `cartons` places extra cartons directly (test
    scenes). One inactive weld `suction_{i}` (gripper <-> package_i) is declared per carton.
    """
    o = options
    cartons_xml = ''.join(_carton_xml(c.draw, c.pos, c.quat) for c in cartons)
    scenery = ''
    if source is not None:
        scenery = source.scenery_xml()
        cartons_xml = source.cartons_xml() + cartons_xml
    indices = package_indices(cartons_xml)
    sr = _fmt(o.suction_solref)
    welds = '\n'.join(
        f'    <weld name="suction_{i}" body1="gripper" body2="package_{i}" active="false" '
        f'solref="{sr}" torquescale="1"/>'
        for i in indices
    )
    if decor not in ('cell', 'plant'):
        raise SceneError(f'decor = {decor!r}; expected one of cell, plant')
    if decor == 'plant':
        lights = plant_xml()
        (hd, ha, hs) = PLANT_HEADLIGHT
    else:
        lights = _lights_xml()
        hd, ha, hs = (0.30, 0.30, 0.30), (0.22, 0.22, 0.22), (0.03, 0.03, 0.03)
    return f"""<mujoco model="palletizer_cell">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{o.timestep}" integrator="{o.integrator}" cone="{o.cone}"
          gravity="{_fmt(o.gravity)}">
    <flag sleep="{'enable' if o.sleep else 'disable'}"/>
  </option>
  <visual>
    <global offwidth="1280" offheight="960"/>
    <quality shadowsize="2048"/>
    <headlight diffuse="{_fmt(hd)}" ambient="{_fmt(ha)}" specular="{_fmt(hs)}"/>
  </visual>
  <asset>
    <texture name="floor_tex" type="2d" builtin="checker" width="512" height="512"
             rgb1="0.42 0.43 0.45" rgb2="0.36 0.37 0.39"/>
    <material name="floor_mat" texture="floor_tex" texrepeat="12 12"/>
    <model name="{ARM_MODEL}" file="{escape(str(UR10E_XML), {'"': '&quot;'})}"/>
  </asset>{_defaults_xml(o)}
  <worldbody>
    <attach model="{ARM_MODEL}" body="robot_base" prefix="{ARM_PREFIX}"/>
    <!-- floor friction 1.0 (docs/cell.md §3.9) -->
    <geom name="floor" class="solid" type="plane" size="6 6 0.05" material="floor_mat"
          friction="1.0 0.01 0.001"/>{lights}{pallet_xml(o.pallet)}{beam_xml(o.pallet)}
{cameras_xml(o.cameras)}
{aux_table_xml(o.aux_table)}
{scenery}
{cartons_xml}
  </worldbody>
  <contact>
    <exclude body1="world" body2="pallet"/>
  </contact>
  <equality>
{pallet_equality_xml()}
{welds}
  </equality>
  <sensor>{ft_sensors_xml()}
  </sensor>
  <keyframe>
    <key name="home" qpos="{_fmt(o.arm.home)}"/>
  </keyframe>
</mujoco>"""


def scene_spec(
    xml: str, arm: ArmParams | None = None, gripper: GripperParams | None = None
) -> mujoco.MjSpec:
    """The spec of a build_scene_xml text with its robot finished: `arm` values on the attached
    UR10e, the VGP20 with `gripper` values at its flange (sim/robot.py `mount_robot`); each
    defaults to its config defaults.

    Pass the ArmParams and GripperParams of the SceneOptions the text was built with.
    """
    try:
        spec = mujoco.MjSpec.from_string(xml)
        mount_robot(spec, arm or ArmParams(), gripper)
    except ValueError as exc:
        raise SceneError(f'scene does not compile: {exc}') from exc
    return spec


def build_scene_spec(
    source: _SceneSource | None = None,
    cartons: Sequence[CartonPlacement] = (),
    options: SceneOptions = SceneOptions(),
    decor: str = 'cell',
) -> mujoco.MjSpec:
    """The full cell as a spec, ready for compile_scene: build_scene_xml, then scene_spec."""
    xml = build_scene_xml(source, cartons, options, decor)
    return scene_spec(xml, options.arm, options.gripper)


def compile_scene(scene: str | mujoco.MjSpec, *, check_steps: int = 0) -> mujoco.MjModel:
    """Compile `scene` (a spec, or a complete MJCF text); raise SceneError on a compile error or
    on any MuJoCo warning.

    With `check_steps` > 0 the model is also stepped that many times from its `home` key and any
    runtime warning (contact buffer full, bad qacc, ...) is an error too.
    """
    warnings: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(warnings.append)
    try:
        try:
            if isinstance(scene, str):
                model = mujoco.MjModel.from_xml_string(scene)
            else:
                model = scene.compile()
        except ValueError as exc:
            raise SceneError(f'scene does not compile: {exc}') from exc
        if check_steps > 0:
            data = mujoco.MjData(model)
            mujoco.mj_resetDataKeyframe(model, data, 0)
            mujoco.mj_step(model, data, check_steps)
            counts = {
                mujoco.mjtWarning(k).name: int(data.warning[k].number)
                for k in range(len(data.warning))
                if data.warning[k].number
            }
            if counts:
                warnings.append(f'runtime warnings {counts}')
    finally:
        mujoco.set_mju_user_warning(previous)
    if warnings:
        raise SceneError('MuJoCo warned: ' + '; '.join(warnings))
    return model
