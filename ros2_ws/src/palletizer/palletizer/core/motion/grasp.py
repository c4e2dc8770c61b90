"""Cup-block choice of the 16-cup VGP20 and the TCP offset of an off-centre block.

The rule: docs/cell.md §3.10.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from palletizer.core.motion.errors import MotionError

__all__ = [
    'G',
    'Grasp',
    'GripperGeometry',
    'block_offsets',
    'grasp_alternatives',
    'plan_grasp',
    'tool_to_world_xy',
]

G = 9.81


@dataclass(frozen=True)
class GripperGeometry:
    """OnRobot VGP20 figures (docs/cell.md §3.10): [m], [N]."""

    body: tuple[float, float, float] = (0.264, 0.184, 0.092)  # L x W x flange-to-cup-face
    columns: int = 4  # along tool x
    rows: int = 4  # along tool y
    pitch_x: float = 0.0747  # 264 mm body across 4 columns, with border
    pitch_y: float = 0.048
    cup_radius: float = 0.020
    force_per_cup: float = 50.0  # catalogue
    derating: float = 0.70  # porous cardboard and tape
    safety_factor: float = 1.5

    @classmethod
    def from_config(cls, gripper: Any) -> GripperGeometry:
        """From cell.yaml's `gripper` block (core.config.cell.GripperConfig)."""
        cups = gripper.cups
        return cls(
            body=(float(gripper.body[0]), float(gripper.body[1]), float(gripper.body[2])),
            columns=int(cups.columns),
            rows=int(cups.rows),
            pitch_x=float(cups.pitch_x),
            pitch_y=float(cups.pitch_y),
            cup_radius=float(cups.radius),
            force_per_cup=float(gripper.force_per_cup_n),
            derating=float(gripper.derating),
            safety_factor=float(gripper.safety_factor),
        )

    def cup_x(self) -> np.ndarray:
        """Cup centre x coordinates along tool x (columns,) [m]."""
        return (np.arange(self.columns) - (self.columns - 1) / 2) * self.pitch_x

    def cup_y(self) -> np.ndarray:
        """Cup centre y coordinates along tool y (rows,) [m]."""
        return (np.arange(self.rows) - (self.rows - 1) / 2) * self.pitch_y


@dataclass(frozen=True)
class Grasp:
    """Active cup block: columns [c0, c1) along tool x, rows [r0, r1) along tool y.

    offset: block centre in the tool frame (x, y) [m]. capacity / required [N]; required is
    None when the mass is not known yet (before weighing).
    """

    c0: int
    c1: int
    r0: int
    r1: int
    offset: tuple[float, float]
    capacity: float
    required: float | None

    @property
    def n_cups(self) -> int:
        return (self.c1 - self.c0) * (self.r1 - self.r0)

    @property
    def feasible(self) -> bool:
        """Cups exist and, when the mass is known, capacity >= mass x g x safety factor."""
        return self.n_cups > 0 and (self.required is None or self.capacity >= self.required)

    @property
    def capacity_ratio(self) -> float | None:
        """grip_capacity_ratio = capacity / required (the `pick` payload), None if mass unknown."""
        if self.required is None or self.required <= 0:
            return None
        return self.capacity / self.required


def _best_run(centres: np.ndarray, half_room: float) -> tuple[int, int]:
    """Longest contiguous run whose half-extent fits half_room; ties -> centre nearest the axis.

    Equal distances (symmetric runs) go to the lower index, so the choice is deterministic.
    """
    n = len(centres)
    for length in range(n, 0, -1):
        half_extent = (centres[length - 1] - centres[0]) / 2
        if half_extent > half_room + 1e-12:
            continue
        starts = range(n - length + 1)
        best = min(starts, key=lambda s: (round(abs(centres[s : s + length].mean()), 12), s))
        return best, best + length
    return 0, 0


def plan_grasp(
    length: float,
    width: float,
    mass: float | None = None,
    gripper: GripperGeometry = GripperGeometry(),
) -> Grasp:
    """The cup-block rule (docs/cell.md §3.10) for a lid `length` along tool x by `width` along
    tool y [m].

    Per axis, the longest contiguous run of cups whose half-extent fits within (half-size - cup
    radius); ties go to the run closest to the tool axis. Capacity = n x 50 N x 0.70 against
    mass x 9.81 x 1.5 when `mass` [kg] is given.
    """
    for name, v in (('length', length), ('width', width)):
        if not math.isfinite(v) or v <= 0:
            raise MotionError(f'plan_grasp: {name} = {v!r}; expected a positive size [m]')
    if mass is not None and (not math.isfinite(mass) or mass < 0):
        raise MotionError(f'plan_grasp: mass = {mass!r}; expected >= 0 kg or None')
    room_x = length / 2 - gripper.cup_radius
    room_y = width / 2 - gripper.cup_radius
    if room_x < 0 or room_y < 0:
        c0 = c1 = r0 = r1 = 0
        offset = (0.0, 0.0)
    else:
        xs, ys = gripper.cup_x(), gripper.cup_y()
        c0, c1 = _best_run(xs, room_x)
        r0, r1 = _best_run(ys, room_y)
        offset = (float(xs[c0:c1].mean()), float(ys[r0:r1].mean()))
    n = (c1 - c0) * (r1 - r0)
    capacity = n * gripper.force_per_cup * gripper.derating
    required = None if mass is None else mass * G * gripper.safety_factor
    return Grasp(c0, c1, r0, r1, offset, capacity, required)


def _runs(centres: np.ndarray, half_room: float) -> list[tuple[int, int]]:
    """Every contiguous run [i0, i1) of cups whose half-extent fits half_room."""
    n = len(centres)
    return [
        (i0, i1)
        for i0 in range(n)
        for i1 in range(i0 + 1, n + 1)
        if (centres[i1 - 1] - centres[i0]) / 2 <= half_room + 1e-12
    ]


def block_offsets(
    length: float, width: float, gripper: GripperGeometry = GripperGeometry()
) -> list[tuple[float, float]]:
    """The offsets (tool x, y) [m] of every cup block whose cups all lie over a lid `length`
    x `width` [m] centred under the block: the rule's first (plan_grasp), then the others by
    distance from the tool axis. Where a block sat over the lid follows from where the flange
    stood over the lid centre: one of these (core.gauge)."""
    rule = plan_grasp(length, width, None, gripper).offset
    out = [rule]
    for g in grasp_alternatives(length, width, None, gripper, limit=None):
        if g.offset not in out:
            out.append(g.offset)
    return out


def grasp_alternatives(
    length: float,
    width: float,
    hold_kg: float | None,
    gripper: GripperGeometry = GripperGeometry(),
    limit: int | None = 12,
) -> list[Grasp]:
    """Cup blocks other than the rule's for a lid `length` x `width` [m], each with its cups
    all over the lid, for a pick whose tool or arm strikes something with the rule's block: the
    block centre still stands over the lid centre, so another block moves the tool (and the
    arm) along the lid, by a cup pitch or more (a column next to the trailer's bulkhead, a low
    carton beside the auxiliary table).

    One block per offset (the one with most cups), none at the rule's offset; only blocks
    whose capacity holds `hold_kg` [kg] by the rule's safety factor (the heaviest carton the
    arm may carry, as the carton is not weighed yet), all when None. Most cups first, then the
    nearest the tool axis; at most `limit`. The mass is not known before the lift: each Grasp's
    `required` is None.
    """
    rule = plan_grasp(length, width, None, gripper)
    if rule.n_cups == 0:
        return []
    xs, ys = gripper.cup_x(), gripper.cup_y()
    room_x = length / 2 - gripper.cup_radius
    room_y = width / 2 - gripper.cup_radius
    need = None if hold_kg is None else hold_kg * G * gripper.safety_factor
    best: dict[tuple[float, float], Grasp] = {}
    for c0, c1 in _runs(xs, room_x):
        for r0, r1 in _runs(ys, room_y):
            off = (round(float(xs[c0:c1].mean()), 9), round(float(ys[r0:r1].mean()), 9))
            n = (c1 - c0) * (r1 - r0)
            capacity = n * gripper.force_per_cup * gripper.derating
            if need is not None and capacity < need:
                continue
            if math.dist(off, rule.offset) < 1e-6:
                continue
            held = best.get(off)
            if held is None or n > held.n_cups:
                best[off] = Grasp(c0, c1, r0, r1, off, capacity, None)
    ranked = sorted(best.values(), key=lambda g: (-g.n_cups, math.hypot(*g.offset), g.c0, g.r0))
    return ranked if limit is None else ranked[:limit]


def tool_to_world_xy(v_tool: tuple[float, float] | np.ndarray, yaw: float) -> np.ndarray:
    """A tool-frame XY vector in world XY for a tool-down pose of heading `yaw` [rad].

    The tool-down rotation is rot_z(yaw) @ diag(1, -1, -1): tool y runs against world y at
    yaw 0, so the vector is mirrored in y before the yaw rotation (converting directly in world
    coordinates doubles the offset on one axis, docs/cell.md §3.10).
    """
    vx, vy = float(v_tool[0]), float(v_tool[1])
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([c * vx + s * vy, s * vx - c * vy])
