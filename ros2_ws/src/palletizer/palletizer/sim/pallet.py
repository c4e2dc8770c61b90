"""EUR-1 pallet: a dynamic 25 kg body on slide joints, welded to the world while palletizing."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['PALLET_JOINTS', 'PalletParams', 'beam_xml', 'pallet_equality_xml', 'pallet_xml']

PALLET_JOINTS: tuple[str, ...] = ('pallet_x', 'pallet_y', 'pallet_z', 'pallet_rx', 'pallet_ry')


@dataclass(frozen=True)
class PalletParams:
    """Pallet figures [m], [kg]; defaults from docs/cell.md §3.2 / configs/cell.yaml `pallet`."""

    size: tuple[float, float, float] = (1.20, 0.80, 0.144)
    centre: tuple[float, float] = (0.60, 0.00)
    mass: float = 25.0
    friction: tuple[float, float, float] = (1.1, 0.01, 0.001)
    # Tilt hinges are locked to +-0.1 mrad while palletizing (docs/cell.md §3.2) and opened to
    # +-1.6 rad for the narrow-beam trial (docs/measurement.md §7.5).
    hinge_lock: float = 0.0001
    hinge_open: float = 1.6
    beam_width: float = 0.10  # stability beam (docs/measurement.md §7.5)
    beam_height: float = 0.05
    beam_friction: float = 1.2

    @property
    def deck_top(self) -> float:
        """Deck top height [m]."""
        return self.size[2]


def _box_inertia(m: float, dims: tuple[float, float, float]) -> tuple[float, float, float]:
    x, y, z = dims
    return (m * (y * y + z * z) / 12, m * (x * x + z * z) / 12, m * (x * x + y * y) / 12)


def pallet_xml(params: PalletParams = PalletParams()) -> str:
    """World-body XML of the pallet: one invisible collision box plus non-colliding boards."""
    p = params
    L, W, H = p.size
    ixx, iyy, izz = _box_inertia(p.mass, p.size)
    fr = ' '.join(str(v) for v in p.friction)
    lock = p.hinge_lock
    boards = []
    # Seven top deck boards and three runners: looks only (the scene's class decor).
    for k in range(7):
        y = -W / 2 + 0.05 + k * (W - 0.10) / 6
        boards.append(
            f'      <geom class="decor" type="box" size="{L / 2} 0.05 0.011" '
            f'pos="0 {y:.4f} {H / 2 - 0.011}" rgba="0.62 0.39 0.18 1"/>'
        )
    for y in (-W / 2 + 0.05, 0.0, W / 2 - 0.05):
        boards.append(
            f'      <geom class="decor" type="box" size="{L / 2 - 0.001} 0.05 0.061" '
            f'pos="0 {y:.4f} {-0.011}" rgba="0.55 0.34 0.15 1"/>'
        )
    boards_xml = '\n'.join(boards)
    return f"""
    <body name="pallet" pos="{p.centre[0]} {p.centre[1]} {H / 2}">
      <inertial pos="0 0 0" mass="{p.mass}" diaginertia="{ixx:.6g} {iyy:.6g} {izz:.6g}"/>
      <!-- damping 2 / 1: reference pallet joints (docs/cell.md §3.2) -->
      <joint name="pallet_x" type="slide" axis="1 0 0" damping="2"/>
      <joint name="pallet_y" type="slide" axis="0 1 0" damping="2"/>
      <joint name="pallet_z" type="slide" axis="0 0 1" damping="2"/>
      <joint name="pallet_rx" type="hinge" axis="1 0 0" damping="1" range="{-lock} {lock}"/>
      <joint name="pallet_ry" type="hinge" axis="0 1 0" damping="1" range="{-lock} {lock}"/>
      <geom name="pallet_geom" class="solid" type="box" size="{L / 2} {W / 2} {H / 2}"
            friction="{fr}" rgba="0.62 0.39 0.18 0" group="3"/>
      <site name="pallet_deck" pos="0 0 {H / 2}" size="0.01" group="4"/>
{boards_xml}
    </body>"""


def beam_xml(params: PalletParams = PalletParams()) -> str:
    """The narrow stability beam: a mocap ridge parked 1 m under the floor, invisible
    (docs/measurement.md §7.5)."""
    p = params
    half_len = max(p.size[0], p.size[1]) / 2 + 0.08
    return f"""
    <body name="stability_beam" mocap="true" pos="{p.centre[0]} {p.centre[1]} -1">
      <geom name="stability_beam_geom" class="solid" type="box"
            size="{half_len} {p.beam_width / 2} {p.beam_height / 2}"
            friction="{p.beam_friction} 0.01 0.001" rgba="0.8 0.8 0.1 0"/>
    </body>"""


def pallet_equality_xml() -> str:
    """The weld that anchors the pallet to the world while palletizing (docs/cell.md §3.2)."""
    # solref 0.004 = 2 x timestep, the stiffest time constant MuJoCo keeps without clamping.
    return (
        '    <weld name="pallet_anchor" body1="pallet" solref="0.004 1" '
        'solimp="0.95 0.99 0.001 0.5 2"/>'
    )
