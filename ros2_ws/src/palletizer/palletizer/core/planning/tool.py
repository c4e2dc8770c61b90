"""The vacuum tool's body over a slot: what a placement must leave clear beyond the carton.

At release the cup faces are cup_gap + drop_clearance (3.5 mm) above the new lid, and the tool
body (264 x 184 mm) is centred on the active cup block, which the cup-block rule centres on the
lid (core.motion.grasp.plan_grasp). Over a carton smaller than the body, or one gripped by an
off-axis block, the body reaches past the carton's rim: a neighbour standing above the new lid
there is pressed by the cups before the carton touches down (level 32 seed 3: a 240 x 180 mm
carton beside a 20 mm taller one; the arm stopped short and the goal check aborted the place).
The planners' clearance ring only keeps neighbours within `clearance` of the rim below the
carton's base; the tool's reach beyond it is checked here against the new lid.
"""

from __future__ import annotations

import numpy as np

from palletizer.core.motion.grasp import GripperGeometry, plan_grasp

__all__ = ['GripperGeometry', 'tcp_shifts', 'tool_half_extents']


def tool_half_extents(
    length: float, width: float, quarter: int, gripper: GripperGeometry
) -> tuple[float, float]:
    """Half extents (x, y) [m] of the tool body around the centre of a carton `length` x
    `width` [m] placed with its length along X (quarter 0) or Y (quarter 1).

    The body is centred on the active cup block, off the lid centre by the block's offset on
    either side (the grasp may hold the carton turned by pi), so the extent is the body's half
    size plus the offset's size on each axis.
    """
    grasp = plan_grasp(length, width, None, gripper)
    hx = gripper.body[0] / 2 + abs(grasp.offset[0])
    hy = gripper.body[1] / 2 + abs(grasp.offset[1])
    return (hy, hx) if quarter % 2 else (hx, hy)


def tcp_shifts(
    length: float, width: float, yaw: np.ndarray, gripper: GripperGeometry | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Where the TCP stands relative to the centre of a carton `length` x `width` [m] placed at
    `yaw` (n,) [rad]: [(dx (n,), dy (n,))] [m] for the tool at yaw and at yaw + pi (the grasp
    may hold the carton either way round), or the centre alone when the cup block is centred
    (or no gripper is given).

    The cup-block rule moves the block, and the TCP with it, off the lid centre on a carton
    smaller than the cup field (core.motion.grasp.plan_grasp): 44 mm on a 240 x 180 mm
    book_s. The arm must reach the TCP there, not the carton's centre: level 17 seed 5 planned
    three slots whose centre the reach table passed and whose TCP it refuses.
    """
    yaw = np.asarray(yaw, dtype=float)
    zero = np.zeros_like(yaw)
    if gripper is None:
        return [(zero, zero)]
    ox, oy = plan_grasp(length, width, None, gripper).offset
    if abs(ox) < 1e-9 and abs(oy) < 1e-9:
        return [(zero, zero)]
    c, s = np.cos(yaw), np.sin(yaw)
    dx, dy = c * ox - s * oy, s * ox + c * oy
    return [(-dx, -dy), (dx, dy)]
