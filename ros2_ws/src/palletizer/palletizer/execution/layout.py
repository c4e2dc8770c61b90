"""Where the arm works in the cell: the furniture its moves must clear and where it waits.

Both come from the cell config alone, so the trajectory_executor node (against the simulated
cell or a real UR10e) and the in-process wiring build the same collision world and ready pose.
"""

from __future__ import annotations

from palletizer.core.config import Config
from palletizer.core.contracts import Observation
from palletizer.core.motion import AABB, MotionParams

__all__ = ['arm_boxes', 'over_carton', 'pick_rise', 'ready_pose', 'static_boxes']


def ready_pose(config: Config, source: str) -> tuple[float, float, float, float] | None:
    """Where the empty arm waits for the next carton: (x, y, z [m], tool yaw [rad]) beside the
    station of a table or conveyor line (motion.ready_offset), high enough that the tallest carton the catalogue can
    deliver passes under the cups with the place clearance to spare; yaw 0, as cartons ride
    the line with their length along it. None for the truck, whose next carton can stand
    anywhere in the bay."""
    cell = config.cell
    if source == 'table':
        (x, y), top = cell.tables.pick.centre, cell.tables.pick.top
    elif source == 'conveyor':
        (x, y), top = cell.conveyor.station, cell.conveyor.top
    else:
        return None
    cat = config.catalogue
    tallest = max([t.dims[2] for t in cat.types.values()] + [cat.random.height[1]])
    clearance = cell.motion.place_clearance + cell.gripper.cup_gap
    # Beside the station rather than over it: the station camera looks straight down and the
    # waiting gripper would hide the next carton's lid.
    dx, dy = cell.motion.ready_offset
    return (x + dx, y + dy, top + tallest + clearance, 0.0)


def over_carton(
    observation: Observation, params: MotionParams
) -> tuple[float, float, float, float]:
    """Where the empty arm waits over a carton already seen at the station: (x, y, z [m],
    tool yaw [rad]) above its centre at the height its pick crosses at (the transit height,
    or the place clearance over its lid where that is higher), yaw the carton's. The pick then
    keeps that height for the few centimetres to its cup block and drops, as every pick
    crosses and drops (core/motion/planner.py)."""
    x, y, z = observation.position
    lid = z + observation.dims_guess[2] / 2
    top = max(params.transit_height, lid + params.cup_gap + params.place_clearance)
    return (x, y, top, observation.yaw)


def static_boxes(config: Config, source: str) -> tuple[AABB, ...]:
    """The fixed furniture the carried carton must not sweep, as axis-aligned boxes."""
    cell = config.cell
    boxes = []
    px, py, _ = cell.robot.base_pos
    rad, h = cell.robot.pedestal.radius, cell.robot.pedestal.height
    boxes.append(AABB((px - rad, py - rad, 0.0), (px + rad, py + rad, h), 'pedestal'))
    aux = cell.tables.auxiliary
    (cx, cy), (hx, hy, _), top = aux.centre, aux.half_size, aux.top
    boxes.append(AABB((cx - hx, cy - hy, 0.0), (cx + hx, cy + hy, top), 'auxiliary_table'))
    if source == 'truck':
        # The trailer's solid walls: the far wall along x = origin_x and the bulkhead along
        # y = origin_y (the robot side is open, docs/cell.md §3.5); 1.30 m high, 5 cm thick.
        (ox, oy), (sx, sy), wall = cell.truck.origin, cell.truck.size, 0.05
        boxes.append(AABB((ox - wall, oy - wall, 0.0), (ox, oy + sy, 1.30), 'truck_far_wall'))
        boxes.append(AABB((ox - wall, oy - wall, 0.0), (ox + sx, oy, 1.30), 'truck_bulkhead'))
    return tuple(boxes)


def pick_rise(config: Config, source: str) -> float:
    """How far above its own lid [m] a picked carton's bottom must rise before it moves
    across: in the trailer another pending top may stand up to tie_band above the presented
    one (the tie rule the source and the detector share), plus truck.lift_clearance; a table
    or conveyor station holds nothing else (0)."""
    if source != 'truck':
        return 0.0
    t = config.cell.truck
    return t.tie_band + t.lift_clearance


def arm_boxes(config: Config, source: str) -> tuple[AABB, ...]:
    """The furniture the arm's forearm and wrist links must clear: the static boxes and the
    pick surface (the pick table or the conveyor; the trailer's walls are static boxes), which
    the tool and the carton touch at every pick and so do not check."""
    cell = config.cell
    boxes = list(static_boxes(config, source))
    if source == 'table':
        t = cell.tables.pick
        (cx, cy), (hx, hy, _), top = t.centre, t.half_size, t.top
        boxes.append(AABB((cx - hx, cy - hy, 0.0), (cx + hx, cy + hy, top), 'pick_table'))
    elif source == 'conveyor':
        c = cell.conveyor
        (cx, cy), (sx, sy), top = c.centre, c.size, c.top
        boxes.append(
            AABB((cx - sx / 2, cy - sy / 2, 0.0), (cx + sx / 2, cy + sy / 2, top), 'conveyor')
        )
    return tuple(boxes)
