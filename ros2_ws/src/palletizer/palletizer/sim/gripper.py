"""OnRobot VGP20 16-cup vacuum gripper: its MJCF (models/vgp20.xml) and the cup rules.

models/vgp20.xml is a standalone MJCF of the gripper body, its sites (`flange`, the F/T frame,
and `tcp`) and its cups; `gripper_spec` loads it through MuJoCo's MjSpec API and sets every value
GripperParams (configs/cell.yaml `gripper`) owns, so the config stays authoritative and the file
holds the config defaults (tests/sim/test_models.py keeps the two equal). sim/robot.py attaches
it at the arm's flange. The cup coverage and capacity rules of docs/cell.md §3.10 live here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

__all__ = [
    'CupBlock',
    'GripperParams',
    'block_capacity',
    'cup_positions',
    'VGP20_XML',
    'configure_gripper',
    'gripper_spec',
    'plan_cup_block',
]

VGP20_XML = Path(__file__).resolve().parent / 'models' / 'vgp20.xml'

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


def _g6(v: float) -> float:
    """`v` as 6-significant-digit MJCF text, as the cup positions were first written: the
    cell's reference model (and its benchmark) was compiled from that text."""
    return float(f'{float(v):.6g}')


def configure_gripper(spec: mujoco.MjSpec, params: GripperParams = GripperParams()) -> None:
    """Set every value GripperParams owns on the VGP20 elements of `spec` (names as in
    vgp20.xml): mass and inertial, body box, tcp site, the cup grid and its contact band.

    A grid of another size than the file's 4 x 4 gets its cups added (class `cup`) or removed.
    """
    p = params
    L, W, H = p.body
    body_h = H - p.cup_height
    body = spec.body('gripper')
    body.mass = p.mass
    body.ipos = [0.0, 0.0, p.com_z]
    body.inertia = list(p.inertia)
    spec.site('tcp').pos = [0.0, 0.0, H]
    box = spec.geom('gripper_body')
    box.size = [L / 2, W / 2, body_h / 2]
    box.pos = [0.0, 0.0, body_h / 2]
    cups = [g for g in body.geoms if g.name.startswith('cup_')]
    xy = cup_positions(p)
    for extra in cups[len(xy) :]:
        spec.delete(extra)
    cup_class = spec.find_default('cup')
    for k, (x, y) in enumerate(xy):
        cup = cups[k] if k < len(cups) else body.add_geom(cup_class, name=f'cup_{k}')
        cup.size = [p.cup_radius, p.cup_height / 2, cup.size[2]]
        cup.pos = [_g6(x), _g6(y), _g6(H - p.cup_height / 2)]
        # The contact band: gap with margin 0 (class `cup`), mujoco-notes "Versions".
        cup.gap = p.seal_band


def gripper_spec(params: GripperParams = GripperParams()) -> mujoco.MjSpec:
    """models/vgp20.xml with the values of `params`; body `gripper`, origin at the flange, z out
    of the flange (down when working)."""
    spec = mujoco.MjSpec.from_file(str(VGP20_XML))
    configure_gripper(spec, params)
    return spec
