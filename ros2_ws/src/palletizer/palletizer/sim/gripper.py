"""OnRobot VGP20 16-cup vacuum gripper: MJCF body and the cup coverage and capacity rules."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    'CupBlock',
    'GripperParams',
    'block_capacity',
    'cup_positions',
    'gripper_body_xml',
    'gripper_defaults_xml',
    'plan_cup_block',
]

G = 9.81


@dataclass(frozen=True)
class GripperParams:
    """VGP20 figures [m], [kg], [N]; defaults from docs/cell.md §3.10 / configs/cell.yaml."""

    mass: float = 2.55
    body: tuple[float, float, float] = (0.264, 0.184, 0.092)  # L x W x flange-to-cup-face
    # Tool inertial of the reference model (docs/cell.md §3.1): CoM 38 mm from the flange.
    com_z: float = 0.038
    inertia: tuple[float, float, float] = (0.0081, 0.0158, 0.0221)
    columns: int = 4
    rows: int = 4
    pitch_x: float = 0.0747  # 264 mm body across 4 columns, with border (docs/cell.md §3.10)
    pitch_y: float = 0.048
    cup_radius: float = 0.020
    cup_height: float = 0.010  # bellows length below the body [m]; visual/contact only
    force_per_cup: float = 50.0  # catalogue [N]
    derating: float = 0.70  # porous cardboard and tape (docs/cell.md §3.10)
    safety_factor: float = 1.5
    cup_gap: float = 0.0015  # cup face to lid at sealing (docs/cell.md §3.10)
    # Contact band of the cups: margin 0 gap 0.004 on MuJoCo 4.x (mujoco-notes "Versions");
    # a lid farther than this from the cup faces does not seal.
    seal_band: float = 0.004

    @property
    def tcp_offset(self) -> float:
        """Flange to cup faces [m]."""
        return self.body[2]


def cup_positions(params: GripperParams = GripperParams()) -> np.ndarray:
    """Cup centres (rows*columns, 2) in the tool frame [m], row-major from -y, -x."""
    xs = (np.arange(params.columns) - (params.columns - 1) / 2) * params.pitch_x
    ys = (np.arange(params.rows) - (params.rows - 1) / 2) * params.pitch_y
    return np.array([(x, y) for y in ys for x in xs])


@dataclass(frozen=True)
class CupBlock:
    """A rectangular block of active cups: column range [c0, c1) and row range [r0, r1)."""

    c0: int
    c1: int
    r0: int
    r1: int

    @property
    def n_cups(self) -> int:
        """Number of active cups."""
        return max(0, self.c1 - self.c0) * max(0, self.r1 - self.r0)

    def indices(self, params: GripperParams = GripperParams()) -> tuple[int, ...]:
        """Cup indices into cup_positions()."""
        return tuple(
            r * params.columns + c
            for r in range(self.r0, self.r1)
            for c in range(self.c0, self.c1)
        )

    def offset(self, params: GripperParams = GripperParams()) -> np.ndarray:
        """Block centre (2,) in the tool frame [m]; zero for an empty block."""
        if self.n_cups == 0:
            return np.zeros(2)
        pts = cup_positions(params)[list(self.indices(params))]
        return pts.mean(axis=0)


def _best_run(n: int, pitch: float, half_room: float) -> tuple[int, int]:
    """Longest contiguous run of cups whose half-extent fits `half_room`; ties -> most central."""
    centres = (np.arange(n) - (n - 1) / 2) * pitch
    for length in range(n, 0, -1):
        if (length - 1) * pitch / 2 > half_room + 1e-12:
            continue
        starts = range(0, n - length + 1)
        best = min(starts, key=lambda s: abs(centres[s : s + length].mean()))
        return best, best + length
    return 0, 0


def plan_cup_block(
    lid_length: float, lid_width: float, params: GripperParams = GripperParams()
) -> CupBlock:
    """The cup-block rule of docs/cell.md §3.10: per tool axis the longest run fitting within
    (lid half-size - cup radius).

    `lid_length` runs along tool x, `lid_width` along tool y [m]. An empty block means the lid
    cannot hold even one cup disc.
    """
    room_x = lid_length / 2 - params.cup_radius
    room_y = lid_width / 2 - params.cup_radius
    if room_x < 0 or room_y < 0:
        return CupBlock(0, 0, 0, 0)
    c0, c1 = _best_run(params.columns, params.pitch_x, room_x)
    r0, r1 = _best_run(params.rows, params.pitch_y, room_y)
    return CupBlock(c0, c1, r0, r1)


def block_capacity(
    block: CupBlock, mass: float, params: GripperParams = GripperParams()
) -> tuple[float, float]:
    """(capacity, required) [N]: n x 50 x 0.70 against mass x g x 1.5 (docs/cell.md §3.10)."""
    capacity = block.n_cups * params.force_per_cup * params.derating
    required = mass * G * params.safety_factor
    return capacity, required


def gripper_defaults_xml() -> str:
    """Default class `cup`: touches cartons and furniture, not the arm; contact band 4 mm."""
    p = GripperParams()
    return f"""
    <default class="cup">
      <!-- margin 0 gap {p.seal_band}: mujoco-notes "Versions" (4.x meaning of margin/gap) -->
      <geom type="cylinder" contype="1" conaffinity="0" margin="0" gap="{p.seal_band}"
            group="0" density="0" friction="0.9 0.01 0.001" rgba="0.1 0.1 0.1 1"/>
    </default>"""


def gripper_body_xml(params: GripperParams = GripperParams()) -> str:
    """The gripper body, origin at the flange, z out of the flange (down when working).

    Sites: `flange` (F/T frame, at the body origin so force/torque sensors read everything the
    wrist carries) and `tcp` at the cup faces.
    """
    p = params
    L, W, H = p.body
    body_h = H - p.cup_height
    cups = []
    for k, (x, y) in enumerate(cup_positions(p)):
        cups.append(
            f'          <geom name="cup_{k}" class="cup" size="{p.cup_radius} '
            f'{p.cup_height / 2}" pos="{x:.6g} {y:.6g} {H - p.cup_height / 2:.6g}"/>'
        )
    cups_xml = '\n'.join(cups)
    return f"""
          <body name="gripper">
            <inertial pos="0 0 {p.com_z}" mass="{p.mass}" diaginertia="{p.inertia[0]} {p.inertia[1]} {p.inertia[2]}"/>
            <site name="flange" size="0.01" rgba="1 0 0 1" group="4"/>
            <site name="tcp" pos="0 0 {H}" size="0.008" rgba="0 1 0 1" group="4"/>
            <geom name="gripper_body" class="collision" type="box"
                  size="{L / 2} {W / 2} {body_h / 2}" pos="0 0 {body_h / 2}"
                  rgba="0.55 0.57 0.6 1"/>
{cups_xml}
          </body>"""
