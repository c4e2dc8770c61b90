"""Tool-down Cartesian motion plans (pick, place, hover, generic waypoints), checked, then timed.

MotionPlanner chooses a plan's waypoints (rise, cross at a safe height, descend; the retreat
after the gripper acts); path.py turns them into a dense path, check.py checks it, timing.py
times it. MotionResult is the outcome, CartonPose a carton's pose; Waypoint (path.py) is
re-exported here.

Why one file of this length (about 500 lines): the four plans share the waypoint choices (the
tool's yaw, the crossing height, the fitted rise) that make them; checking and timing already
live in their own modules.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Concatenate, ParamSpec

import numpy as np

from palletizer.core.motion.check import (
    COLLISION,
    GRASP_SLIP,
    IK_UNREACHABLE,
    ArmModel,
    CheckedPath,
    Refusal,
    check_path,
    reach_limit,
)
from palletizer.core.motion.collision import CarriedLoad, CollisionWorld
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.grasp import (
    Grasp,
    GripperGeometry,
    grasp_alternatives,
    plan_grasp,
    tool_to_world_xy,
)
from palletizer.core.motion.joint_transit import joint_transit_path
from palletizer.core.motion.kinematics import DH, UR10eKinematics, branch_index, yaw_of
from palletizer.core.motion.params import MotionParams
from palletizer.core.motion.path import (
    Waypoint,
    around_base,
    group_legs,
    legs_through,
    sample_path,
    wrap_pi,
)
from palletizer.core.motion.timing import (
    JointTrajectory,
    PathLimits,
    PathTiming,
    SegmentTiming,
    sample_segments,
    time_optimal,
    time_segment,
)

__all__ = ['CartonPose', 'MotionPlanner', 'MotionResult', 'Waypoint']


@dataclass(frozen=True)
class CartonPose:
    """A carton's centre [m], yaw [rad] and dims (L along its x, W, H) [m] in the world."""

    x: float
    y: float
    z: float
    yaw: float
    dims: tuple[float, float, float]

    def __post_init__(self) -> None:
        if len(self.dims) != 3 or min(self.dims) <= 0:
            raise MotionError(f'CartonPose.dims = {self.dims!r}; expected 3 positive sizes [m]')


@dataclass(frozen=True, eq=False)
class MotionResult:
    """Outcome of a checked plan.

    ok: every sample reachable, in limits, branch-continuous and collision-free. cause: None or
    'ik_unreachable' / 'collision' / 'grasp_slip'. failing_waypoint: index into `waypoints`.
    trajectory: motion to the seal / release pose (or the whole generic move); retreat: the lift
    or retract after the gripper acts (None for generic moves). Both None unless ok.
    """

    ok: bool
    cause: str | None
    failing_waypoint: int | None
    trajectory: JointTrajectory | None
    waypoints: tuple[Waypoint, ...] = ()
    retreat: JointTrajectory | None = None
    grasp: Grasp | None = None
    message: str = ''

    @property
    def failing_name(self) -> str | None:
        if self.failing_waypoint is None or self.failing_waypoint >= len(self.waypoints):
            return None
        return self.waypoints[self.failing_waypoint].name

    @property
    def q_end(self) -> np.ndarray | None:
        """Final joint configuration (after the retreat when there is one)."""
        last = self.retreat if self.retreat is not None else self.trajectory
        return None if last is None else last.q[-1].copy()


# A climbing cross reaches its cross height this share of the way to the target.
_CLIMB_SHARE = 0.4
# The least clearance [m] between a carried carton and the stack top a cross may take when
# the configured stack_clearance is out of the arm's reach (every sample is still checked).
_MIN_CROSS_CLEARANCE = 0.05


# Beyond the carried footprint, the width [m] of the corridor whose stack a fallback cross
# clears (a tracking error and the blend's cut of a corner stay well inside it).
_CORRIDOR_MARGIN = 0.05

# The most a leg of a cross may turn the tool [rad]: a leg's yaw is taken within a half turn
# of the previous waypoint's, so a longer turn (a carton frame kept at a wrist-3 limit) is cut.
_MAX_LEG_TURN = 0.75 * math.pi


def _split_turns(
    wps: list[Waypoint], x0: float, y0: float, z0: float, yaw0: float
) -> list[Waypoint]:
    """wps with each leg that turns the tool more than _MAX_LEG_TURN cut into equal legs on
    its straight line (the path and its corners are unchanged)."""
    out: list[Waypoint] = []
    px, py, pz, pyaw = x0, y0, z0, yaw0
    for wp in wps:
        n = math.ceil(abs(wp.yaw - pyaw) / _MAX_LEG_TURN - 1e-9)
        for i in range(1, n):
            f = i / n
            out.append(
                Waypoint(
                    px + f * (wp.x - px),
                    py + f * (wp.y - py),
                    pz + f * (wp.z - pz),
                    pyaw + f * (wp.yaw - pyaw),
                    wp.speed,
                    wp.name,
                )
            )
        out.append(wp)
        px, py, pz, pyaw = wp.x, wp.y, wp.z, wp.yaw
    return out


_P = ParamSpec('_P')


def _yaw_fallback(
    plan: Callable[Concatenate[MotionPlanner, _P], MotionResult],
) -> Callable[Concatenate[MotionPlanner, _P], MotionResult]:
    """A plan that, with a joint-space transit, is planned once more when refused at the tool
    yaw that turns wrist 3 least, now at the yaw that turns the tool least in the world, as
    the Cartesian transit chooses: the Cartesian cross a joint one is checked against first
    may find no IK at the first (graph run, level 21 seed 1: wrist 3 past a limit on the way
    back to the source)."""

    @functools.wraps(plan)
    def planned(self: MotionPlanner, /, *args: _P.args, **kwargs: _P.kwargs) -> MotionResult:
        res = plan(self, *args, **kwargs)
        if res.ok or self.params.transit != 'joint':
            return res
        self._world_yaw = True
        try:
            other = plan(self, *args, **kwargs)
        finally:
            self._world_yaw = False
        return other if other.ok else res

    return planned


class MotionPlanner:
    """Plans tool-down Cartesian moves for the UR10e and checks them before timing them."""

    def __init__(
        self,
        kinematics: UR10eKinematics | None = None,
        params: MotionParams | None = None,
        gripper: GripperGeometry | None = None,
    ) -> None:
        self.params = params or MotionParams()
        self.kin = kinematics or UR10eKinematics(limits=self.params.limits)
        if self.kin.limits != self.params.limits:
            raise MotionError(
                'MotionPlanner: kinematics.limits and params.limits differ; pass the same '
                'JointLimits to both'
            )
        self.gripper = gripper or GripperGeometry()
        # Set while _yaw_fallback plans again at the least world turn.
        self._world_yaw = False

    # Public plans -----------------------------------------------------------------------------
    def plan_cartesian(
        self,
        q_start: np.ndarray,
        waypoints: list[Waypoint] | tuple[Waypoint, ...],
        world: CollisionWorld | None = None,
        load: CarriedLoad | None = None,
    ) -> MotionResult:
        """Straight-line moves through `waypoints` from q_start, checked, then timed."""
        wps = tuple(waypoints)
        checked = self._check(np.asarray(q_start, dtype=float), wps, world, load, 0)
        if isinstance(checked, Refusal):
            return MotionResult(
                False, checked.cause, checked.failing, None, wps, message=checked.message
            )
        return MotionResult(True, None, None, self._time(checked), wps)

    @_yaw_fallback
    def plan_pick(
        self,
        q_start: np.ndarray,
        carton: CartonPose,
        world: CollisionWorld | None = None,
        mass: float | None = None,
        grasp: Grasp | None = None,
        rise: float = 0.0,
    ) -> MotionResult:
        """Rise, cross at transit height, descend onto the lid (+ cup gap); then the lift.
        A pick refused for a collision is tried once more with the tool turned by a half turn,
        then with each other cup block that holds the heaviest carton the arm may carry
        (grasp_alternatives, MotionParams.max_carton_kg), at both turns.
        rise [m]: the lift takes the carton's bottom at least this far above its lid as it
        stood, before any move across (the source's other cartons may stand that high).

        The cup block is `grasp` when given, else the cup-block rule (docs/cell.md §3.10) on the
        carton's dims (and mass when known); its off-centre offset is cancelled in the commanded
        TCP from the approach onward (same section).
        """
        q0 = np.asarray(q_start, dtype=float)
        L, W, _ = carton.dims
        if grasp is None:
            grasp = plan_grasp(L, W, mass, self.gripper)
        if not grasp.feasible:
            return MotionResult(
                False,
                GRASP_SLIP,
                None,
                None,
                grasp=grasp,
                message=f'no cup block holds the carton: {grasp.n_cups} cups, capacity '
                f'{grasp.capacity:.1f} N vs required {grasp.required}',
            )
        yaw = self._choose_yaw(q0, self._tcp(q0)[3], carton.yaw, carton.x, carton.y)
        first = self._pick_at_yaw(q0, carton, world, grasp, yaw, rise)
        if first.cause != COLLISION:
            return first
        # The box is the same a half turn round, the tool and the arm are not: a pick whose
        # tool or arm strikes a wall or a table (a truck column against the bulkhead, the
        # auxiliary table beside a low column) is tried once more with the tool turned by pi.
        other = yaw - math.copysign(math.pi, yaw - self._tcp(q0)[3])
        second = self._pick_at_yaw(q0, carton, world, grasp, other, rise)
        if second.ok:
            return second
        # Then with another cup block over the lid, which moves the tool along the lid by a
        # cup pitch or more (grasp_alternatives): a small carton against the bulkhead, whose
        # block the rule set off-centre towards the wall (level 33 seeds 9 and 32), or a low
        # one beside the auxiliary table that the wrist passes 5-8 mm too close to (level 33
        # seeds 14 and 17). The block must hold the heaviest carton the arm may carry.
        for alt in grasp_alternatives(L, W, self.params.max_carton_kg, self.gripper):
            for turn in (yaw, other):
                res = self._pick_at_yaw(q0, carton, world, alt, turn, rise)
                if res.ok:
                    return res
        return first

    def _pick_at_yaw(
        self,
        q0: np.ndarray,
        carton: CartonPose,
        world: CollisionWorld | None,
        grasp: Grasp,
        yaw: float,
        rise: float = 0.0,
    ) -> MotionResult:
        """plan_pick with the tool at `yaw` [rad]."""
        p = self.params
        L, W, H = carton.dims
        x0, y0, z0, yaw0 = self._tcp(q0)
        off = tool_to_world_xy(grasp.offset, yaw)
        tx, ty = carton.x - off[0], carton.y - off[1]
        seal_z = carton.z + H / 2 + p.cup_gap
        hf_top = self._stack_top(world)
        safe_z = max(p.transit_height, seal_z + p.place_clearance, hf_top + p.stack_clearance)
        load = CarriedLoad((L, W, H), grasp.offset)
        lift_z = max(safe_z, hf_top + H + p.cup_gap + p.stack_clearance, seal_z + H + rise)
        for fit in (False, True):
            approach = self._over_and_down(
                q0,
                x0,
                y0,
                z0,
                yaw0,
                tx,
                ty,
                yaw,
                safe_z,
                seal_z,
                'seal',
                fit=fit,
                z_floor=max(p.transit_height, seal_z + p.place_clearance),
            )
            if fit:
                # As high as the arm reaches above the source (a tall stack's clearance over
                # a far source): the place then climbs on its way.
                # At least what the source asks (above the transit height, the carton's
                # bottom `rise` above its lid), not the stack's clearance: that may be out of
                # reach here, and the place's own cross climbs to it.
                # Where the arm reaches the cross height there, the lift keeps it as its floor
                # (a lower floor let level 33 seed 1's truck lift stop where the path found
                # no continuous IK).
                lift_lo = min(lift_z, max(p.transit_height, seal_z + H + rise))
                if self._rise_limit(q0, tx, ty, yaw, lift_lo, safe_z) >= safe_z:
                    lift_lo = safe_z
                lift_z = self._rise_limit(q0, tx, ty, yaw, lift_lo, lift_z)
            lift = (Waypoint(tx, ty, lift_z, yaw, None, 'lift'),)
            res = self._two_phase(q0, approach, None, lift, load, world, grasp)
            if res.cause != IK_UNREACHABLE:
                break
        return res

    @_yaw_fallback
    def plan_place(
        self,
        q_start: np.ndarray,
        target: CartonPose,
        grasp: Grasp,
        world: CollisionWorld | None = None,
        held_turn: float | None = None,
    ) -> MotionResult:
        """Rise, cross above the stack, descend to the release height; then the retract.

        held_turn [rad]: the tool's yaw less the carton frame's yaw as the carton was picked
        (the pick's last waypoint yaw less the observed yaw: 0 or a half turn). When given, the tool ends at
        target.yaw + held_turn modulo a full turn, so the carton frame (the one its weighed CoG
        is in) ends at target.yaw: a planner that turns an off-centre CoG by a half turn gets
        it where it planned it. None: any half turn (the carton as a symmetric box).

        Release height = target centre z + H/2 + cup gap + drop clearance (docs/cell.md §3.11).
        The cross height clears the height map's top by the carried carton's height plus stack
        clearance; where the arm does not reach that on the way, by as much as it reaches (at
        least _MIN_CROSS_CLEARANCE), the plan's second try.
        """
        p = self.params
        q0 = np.asarray(q_start, dtype=float)
        L, W, H = target.dims
        x0, y0, z0, yaw0 = self._tcp(q0)
        if held_turn is None:
            yaw = self._choose_yaw(q0, yaw0, target.yaw, target.x, target.y)
        else:
            yaw = self._choose_yaw(
                q0, yaw0, target.yaw + held_turn, target.x, target.y, period=2.0 * math.pi
            )
        off = tool_to_world_xy(grasp.offset, yaw)
        tx, ty = target.x - off[0], target.y - off[1]
        release_z = target.z + H / 2 + p.cup_gap + p.drop_clearance
        hf_top = self._stack_top(world)
        low_z = max(p.transit_height, release_z + p.place_clearance)
        safe_z = max(low_z, hf_top + H + p.cup_gap + p.stack_clearance)
        # The empty cups retract straight up to the height the move back to the source would
        # rise to from there anyway (plan_hover's safe height over the stack with this carton
        # on it), as far as the arm reaches above the target, at least the approach height:
        # one vertical move instead of two, each from rest to rest.
        rise_z = max(p.transit_height, max(hf_top, target.z + H / 2) + p.stack_clearance)
        retract_z = self._rise_limit(q0, tx, ty, yaw, release_z + p.place_clearance, rise_z)
        retract = (Waypoint(tx, ty, retract_z, yaw, None, 'retract'),)
        load = CarriedLoad((L, W, H), grasp.offset)
        approach = self._over_and_down(
            q0, x0, y0, z0, yaw0, tx, ty, yaw, safe_z, release_z, 'release'
        )
        res = self._two_phase(q0, approach, load, retract, None, world, grasp)
        if res.cause != IK_UNREACHABLE:
            return res
        # Over a tall stack the full clearance can be out of reach along the cross (level 16:
        # 1.42 m at 0.82 m from the base axis, which the UR10e reaches to ~1.40 m): the cross
        # then runs as high as the arm reaches on the way, down to _MIN_CROSS_CLEARANCE above
        # the stack; the swept checks verify every sample against the height map.
        # The clearance is asked of the stack under the way only (within the carried
        # footprint's reach of it): a set-aside on the auxiliary table, 1.15 m from the base
        # axis where the arm reaches ~1.1 m, never passes the 1.2 m stack beside it.
        vias = [(vx, vy) for vx, vy, _ in self._around_base(x0, y0, tx, ty)]
        probes = [(x0 + f * (tx - x0), y0 + f * (ty - y0)) for f in (0.25, 0.5, 0.75, 1.0)]
        if world is not None:
            hf_top = world.corridor_top(
                p.deck_z, [(x0, y0), *vias, (tx, ty)], self._sweep_radius(L, W, grasp)
            )
        safe_z = reach_limit(
            self.kin,
            q0,
            probes + vias,
            yaw,
            max(low_z, hf_top + H + p.cup_gap + _MIN_CROSS_CLEARANCE),
            max(low_z, hf_top + H + p.cup_gap + p.stack_clearance),
        )
        # A start above that (a lift as high as the source allowed) keeps its height across
        # only where the arm reaches it on the way; else the cross descends to safe_z.
        hold = z0 <= safe_z or reach_limit(self.kin, q0, probes + vias, yaw, safe_z, z0) >= z0
        approach = self._over_and_down(
            q0, x0, y0, z0, yaw0, tx, ty, yaw, safe_z, release_z, 'release', hold, fit=True
        )
        return self._two_phase(q0, approach, load, retract, None, world, grasp)

    @_yaw_fallback
    def plan_hover(
        self,
        q_start: np.ndarray,
        x: float,
        y: float,
        z: float,
        world: CollisionWorld | None = None,
        yaw: float | None = None,
    ) -> MotionResult:
        """Empty-arm move to hover tool-down at (x, y, z): the move that waits above a source
        for its next carton.

        The cross runs at or above the safe height (the transit height and the stack clearance
        over the height map); an arm already that high goes straight (round the base when the
        line passes it), so its height changes on the way while staying safe; a lower arm
        rises vertically first. A higher cross ends with a vertical descent to z. The tool
        ends at `yaw` modulo a half turn (the cartons' expected yaw; the turn nearest the
        current one), or keeps its yaw when None.
        """
        p = self.params
        q0 = np.asarray(q_start, dtype=float)
        for name, v in (('x', x), ('y', y), ('z', z)):
            if not math.isfinite(v):
                raise MotionError(f'plan_hover: {name} = {v!r}; expected a finite number [m]')
        x0, y0, z0, yaw0 = self._tcp(q0)
        yaw1 = yaw0 if yaw is None else self._choose_yaw(q0, yaw0, yaw, x, y)
        safe_z = max(p.transit_height, self._stack_top(world) + p.stack_clearance)
        start, goal = (x0, y0, z0, yaw0), (x, y, z, yaw1)
        res = self._hover(q0, start, goal, safe_z, world, fit=False)
        if res.cause != IK_UNREACHABLE:
            return res
        # Above a tall stack the safe height can be out of reach on the way (level 16: 1.38 m
        # above the pick table's wait point, which the arm reaches to ~1.24 m): each point of
        # the cross then runs as high as the arm reaches there, down to the transit height;
        # the swept checks say whether the stack allows that.
        return self._hover(q0, start, goal, safe_z, world, fit=True)

    def _hover(
        self,
        q0: np.ndarray,
        start: tuple[float, float, float, float],
        goal: tuple[float, float, float, float],
        safe_z: float,
        world: CollisionWorld | None,
        fit: bool,
    ) -> MotionResult:
        """plan_hover's waypoints and plan from the TCP `start` to hover at `goal` (x, y, z,
        yaw each); with `fit`, each waypoint no higher than the arm reaches there (at least
        the transit height or the goal's z)."""
        p = self.params
        x0, y0, z0, yaw0 = start
        x, y, z, yaw1 = goal
        floor = max(p.transit_height, z)

        def at(px: float, py: float, pyaw: float, pz: float) -> float:
            return self._rise_limit(q0, px, py, pyaw, min(floor, pz), pz) if fit else pz

        wps = []
        # An arm within a millimetre of the safe height (a retract that rose to it, tracked
        # to a tenth of a millimetre) is at it: no rise of its own.
        if z0 < safe_z - 1e-3:
            z_rise = at(x0, y0, yaw0, safe_z)
            if z_rise > z0 + 1e-6:
                wps.append(Waypoint(x0, y0, z_rise, yaw0, None, 'rise'))
                z0 = z_rise
        z1 = max(z, safe_z)
        vias = self._around_base(x0, y0, x, y)
        for vx, vy, f in vias:
            vyaw = yaw0 + f * (yaw1 - yaw0)
            wps.append(
                Waypoint(vx, vy, at(vx, vy, vyaw, z0 + f * (z1 - z0)), vyaw, None, 'around')
            )
        z1 = at(x, y, yaw1, z1)
        if math.dist((x, y, z1), (x0, y0, z0)) > 1e-6 or abs(yaw1 - yaw0) > 1e-6:
            wps.append(Waypoint(x, y, z1, yaw1, None, 'cross'))
        if z1 > z + 1e-6:
            wps.append(Waypoint(x, y, z, yaw1, None, 'hover'))
        if not wps:
            return MotionResult(True, None, None, None, ())
        return self.plan_cartesian(q0, wps, world, None)

    # Waypoint construction --------------------------------------------------------------------
    def _tcp(self, q: np.ndarray) -> tuple[float, float, float, float]:
        """Current TCP (x, y, z, yaw); the tool must point down within 5 mrad.

        A tracked arm ends a move with a small residual tilt (0.2 mrad seen after a 1.2 rad
        swing around the base); the next plan starts tool-down from the measured position.
        """
        T = self.kin.fk(q)
        if T[2, 2] > -math.cos(5e-3):
            raise MotionError(
                f'start configuration {np.round(q, 4).tolist()} does not point the tool down '
                f'(tool z = {np.round(T[:3, 2], 4).tolist()}); move to a tool-down pose first'
            )
        return float(T[0, 3]), float(T[1, 3]), float(T[2, 3]), float(yaw_of(T))

    def _sweep_radius(self, L: float, W: float, grasp: Grasp) -> float:
        """How far [m] from the tool axis the tool body or a carried L x W carton (at the
        grasp's offset) reaches, plus _CORRIDOR_MARGIN."""
        bx, by, _ = self.gripper.body
        body = math.hypot(bx, by) / 2
        carton = math.hypot(L, W) / 2 + math.hypot(*grasp.offset)
        return max(body, carton) + _CORRIDOR_MARGIN

    def _stack_top(self, world: CollisionWorld | None) -> float:
        if world is None:
            return self.params.deck_z
        return world.stack_top(self.params.deck_z)

    def _rise_limit(
        self, q_ref: np.ndarray, x: float, y: float, yaw: float, z_lo: float, z_hi: float
    ) -> float:
        """check.reach_limit at one point (x, y): z_hi when the tool reaches it there; else the
        highest z above z_lo it reaches, less a margin, at least z_lo."""
        return reach_limit(self.kin, q_ref, [(x, y)], yaw, z_lo, z_hi)

    def _over_and_down(
        self,
        q0: np.ndarray,
        x0: float,
        y0: float,
        z0: float,
        yaw0: float,
        tx: float,
        ty: float,
        yaw: float,
        safe_z: float,
        final_z: float,
        final_name: str,
        hold: bool = True,
        fit: bool = False,
        z_floor: float | None = None,
    ) -> tuple[Waypoint, ...]:
        """Vertical rise, cross at max(safe_z, current z), fast drop to final_z + clearance,
        final descent at approach speed.

        With `fit` (the plans' second try after an unreachable first): where the arm cannot
        rise to the cross height where it stands (level 16: a 1.0 m stack asks 1.43 m above
        the table station, which the UR10e reaches only to ~1.40 m), it rises as high as it
        reaches and climbs over the first part of the cross (to the first via round the base,
        else _CLIMB_SHARE of the way); the swept checks say whether the stack allows that.
        hold=False: a start above safe_z crosses down to safe_z instead of keeping its height.
        z_floor (with `fit`): the least height the cross needs away from the stack (an empty
        arm bound for a source). Each via and the cross's end then run as high as the arm
        reaches there, down to z_floor: leaving a 1.1 m stack for the pick table, the cross
        descends on the way instead of asking the stack's clearance where the arm reaches only
        ~1.24 m (level 16). The swept checks say whether the stack allows it.
        """
        p = self.params
        z_cross = max(safe_z, z0) if hold else safe_z

        def at(x: float, y: float, yaw_at: float) -> float:
            if not fit or z_floor is None or z_floor >= z_cross:
                return z_cross
            return self._rise_limit(q0, x, y, yaw_at, z_floor, z_cross)

        wps = []
        z_rise = z_cross
        if z_cross > z0 + 1e-6:
            if fit:
                z_rise = self._rise_limit(q0, x0, y0, yaw0, z0, z_cross)
            if z_rise > z0 + 1e-6:
                wps.append(Waypoint(x0, y0, z_rise, yaw0, None, 'rise'))
        vias = self._around_base(x0, y0, tx, ty)
        if z_rise < z_cross - 1e-6 and not vias:
            f = _CLIMB_SHARE
            cx, cy, cyaw = x0 + f * (tx - x0), y0 + f * (ty - y0), yaw0 + f * (yaw - yaw0)
            wps.append(Waypoint(cx, cy, at(cx, cy, cyaw), cyaw, None, 'climb'))
        for vx, vy, f in vias:
            vyaw = yaw0 + f * (yaw - yaw0)
            wps.append(Waypoint(vx, vy, at(vx, vy, vyaw), vyaw, None, 'around'))
        z_end = at(tx, ty, yaw)
        wps.append(Waypoint(tx, ty, z_end, yaw, None, 'cross'))
        wps = _split_turns(wps, x0, y0, z0, yaw0)
        pre_z = final_z + p.place_clearance
        if z_end > pre_z + 0.01:
            wps.append(Waypoint(tx, ty, pre_z, yaw, None, 'pre_' + final_name))
        wps.append(Waypoint(tx, ty, final_z, yaw, p.approach_speed, final_name))
        return tuple(wps)

    def _around_base(
        self, x0: float, y0: float, x1: float, y1: float
    ) -> list[tuple[float, float, float]]:
        """path.around_base for this arm: via points (x, y, fraction of the way) that keep a
        cross from (x0, y0) to (x1, y1) base_clearance from the robot's vertical axis."""
        base_xy = (self.kin.base_xyz[0], self.kin.base_xyz[1])
        return around_base(x0, y0, x1, y1, base_xy, self.params.base_clearance)

    def _choose_yaw(
        self,
        q0: np.ndarray,
        yaw0: float,
        target_yaw: float,
        x: float,
        y: float,
        period: float = math.pi,
    ) -> float:
        """Tool yaw for a box at `target_yaw`: any target + k period (pi: a box is symmetric
        under a half turn; 2 pi: the carton frame must end at its yaw). Prefer the smallest turn
        from the current yaw whose predicted wrist-3 angle keeps 0.3 rad from its limits; q6
        follows q1 - yaw in the working family."""
        lo, hi = self.kin.limits.lower[5] + 0.3, self.kin.limits.upper[5] - 0.3
        cands = []
        for k in range(-4, 5):
            c = yaw0 + wrap_pi(target_yaw - yaw0) + k * period
            # Up to a full turn: where the short turns leave wrist 3 past a limit (a half turn
            # and a hair, level 32 seed 1), a longer one is cut into legs by _split_turns.
            if abs(c - yaw0) <= 2.0 * math.pi + 1e-9:
                cands.append(c)
        best, best_cost = cands[0], math.inf
        dq1 = self._base_turn(q0, x, y)
        # A joint-space cross turns the tool's yaw with the shoulder pan for free: there the
        # turn that moves wrist 3 least is the fastest (joint_transit.py).
        wrist = self.params.transit == 'joint' and not self._world_yaw
        for c in cands:
            q6 = q0[5] + dq1 - (c - yaw0)
            turn = abs(q6 - q0[5]) if wrist else abs(c - yaw0)
            cost = turn + (10.0 if not lo <= q6 <= hi else 0.0)
            if cost < best_cost - 1e-9:
                best, best_cost = c, cost
        return best

    def _base_turn(self, q0: np.ndarray, x: float, y: float) -> float:
        """The shoulder-pan change [rad] a cross from q0 to above (x, y) makes on q0's branch:
        the TCP's sweep round the base axis along the straight legs and the vias round the base
        (each leg misses the axis, so its sweep is its wrapped angle), plus the change of the
        shoulder's offset from that bearing, +-acos(d4 / r) with r the distance from the axis
        (the wrist centre stands above the TCP when the tool points down). The nearest IK is
        no guide: level 32 seed 1 got the solution a full turn the other way round, level 33
        seed 48 one on the other shoulder branch, and both chose a tool yaw whose wrist-3
        angle left its limits on the way."""
        bx, by = self.kin.base_xyz[0], self.kin.base_xyz[1]
        x0, y0, _, _ = self._tcp(q0)
        pts = [(x0, y0), *((vx, vy) for vx, vy, _ in self._around_base(x0, y0, x, y)), (x, y)]
        bearing = [math.atan2(py - by, px - bx) for px, py in pts]
        sweep = sum(wrap_pi(b - a) for a, b in itertools.pairwise(bearing))
        sign = 1.0 if branch_index(q0) < 4 else -1.0

        def offset(px: float, py: float) -> float:
            return sign * math.acos(min(1.0, DH['d4'] / max(math.hypot(px - bx, py - by), 1e-9)))

        return sweep + offset(x, y) - offset(x0, y0)

    # Checking and timing ----------------------------------------------------------------------
    def _two_phase(
        self,
        q0: np.ndarray,
        first: tuple[Waypoint, ...],
        first_load: CarriedLoad | None,
        second: tuple[Waypoint, ...],
        second_load: CarriedLoad | None,
        world: CollisionWorld | None,
        grasp: Grasp,
    ) -> MotionResult:
        """`first` from q0 with first_load, then `second` from where it ends with second_load:
        the trajectory and the retreat, or the first refusal (indices into both together)."""
        wps = first + second
        a = self._check(q0, first, world, first_load, 0)
        if isinstance(a, Refusal):
            return MotionResult(
                False, a.cause, a.failing, None, wps, grasp=grasp, message=a.message
            )
        b = self._check(a.q_end, second, world, second_load, len(first))
        if isinstance(b, Refusal):
            return MotionResult(
                False, b.cause, b.failing, None, wps, grasp=grasp, message=b.message
            )
        return MotionResult(True, None, None, self._time(a), wps, self._time(b), grasp)

    def _check(
        self,
        q0: np.ndarray,
        wps: tuple[Waypoint, ...],
        world: CollisionWorld | None,
        load: CarriedLoad | None,
        index0: int,
    ) -> CheckedPath | Refusal:
        """The dense path through `wps` from q0 (path.py), checked sample by sample (check.py):
        with its transit corners rounded (MotionParams.blend_radius) so the arm does not stop
        there; when that fails, with a stop at every corner, and that result stands. A failing
        waypoint's index is index0 + its index in `wps`."""
        p = self.params
        if not wps:
            raise MotionError('a motion needs at least one waypoint')
        legs = legs_through(self._tcp(q0), wps, index0, p)
        arm = ArmModel.of(self.kin)
        accel = p.cartesian_accel if load is not None else p.empty_accel
        # Rounded corners suit the time-optimal timings, which slow only where the curvature
        # needs it; a ruckig segment would run at its corners' speed throughout.
        for blend in (False,) if p.timing == 'ruckig' else (True, False):
            path = sample_path(legs, group_legs(legs, blend, p), p, accel)
            checked = check_path(q0, path, index0, arm, p, world, self.gripper.body, load)
            if isinstance(checked, CheckedPath):
                break
        if p.transit != 'joint' or not isinstance(checked, CheckedPath) or p.timing == 'ruckig':
            return checked
        # The cross as a line in joint space (joint_transit.py), where it passes the same
        # checks and is faster: a Cartesian plan that passed stands otherwise, so no plan is
        # refused that the Cartesian transit makes.
        joint = joint_transit_path(q0, legs, arm, p, accel)
        if joint is None:
            return checked
        other = check_path(q0, joint, index0, arm, p, world, self.gripper.body, load)
        if not isinstance(other, CheckedPath):
            return checked
        fast, slow = self._time(other), self._time(checked)
        if fast.duration < slow.duration:
            return replace(other, timed=fast)
        return replace(checked, timed=slow)

    def _time(self, checked: CheckedPath) -> JointTrajectory:
        """The checked segments timed rest to rest (MotionParams.timing) and sampled."""
        if checked.timed is not None:
            return checked.timed
        p = self.params
        timings: list[SegmentTiming | PathTiming]
        if p.timing == 'ruckig':
            # Ruckig on each segment's path coordinate: one speed, acceleration and jerk
            # bound for the whole segment (its slowest stretch), jerk-limited throughout.
            timings = [
                time_segment(
                    seg.s,
                    seg.q,
                    PathLimits(
                        float(np.min(seg.cap)),
                        seg.accel,
                        p.cartesian_jerk * seg.accel / p.cartesian_accel,
                    ),
                    p.limits,
                    p.curvature_share,
                )
                for seg in checked.segments
            ]
        else:
            smooth = p.timing == 'jerk_limited'
            timings = [
                time_optimal(seg.s, seg.q, seg.cap, seg.accel, p.limits, None, smooth)
                for seg in checked.segments
            ]
        return sample_segments(timings, p.limits, p.rate_hz, p.timing != 'time_optimal')
