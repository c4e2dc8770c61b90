"""Tool-down Cartesian motion plans (pick, place, generic waypoints), checked before timing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.collision import CarriedLoad, CollisionWorld, first_collision
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.grasp import Grasp, GripperGeometry, plan_grasp, tool_to_world_xy
from palletizer.core.motion.kinematics import (
    DH_ARRAYS,
    TWO_PI,
    UR10eKinematics,
    arm_box_hits,
    branch_family,
    branch_index,
    tool_down,
    wrist_near_mount,
    yaw_of,
)
from palletizer.core.motion.params import MotionParams
from palletizer.core.motion.timing import (
    JointTrajectory,
    PathLimits,
    sample_segments,
    time_optimal,
    time_segment,
)

__all__ = ['CartonPose', 'MotionPlanner', 'MotionResult', 'Waypoint']

# Failure causes, from the closed vocabulary of episode failures (docs/telemetry.md §8.2).
IK_UNREACHABLE = 'ik_unreachable'
COLLISION = 'collision'
# No cup block can hold the carton: it would slip, the vocabulary's nearest cause.
GRASP_SLIP = 'grasp_slip'


@dataclass(frozen=True)
class Waypoint:
    """A tool-down Cartesian target: TCP position [m] and yaw [rad] in the world frame.

    speed: Cartesian speed of the segment that ends here [m/s] (None: MotionParams transit
    speed). name: what the waypoint is for, reported when it fails.
    """

    x: float
    y: float
    z: float
    yaw: float
    speed: float | None = None
    name: str = ''


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


@dataclass(frozen=True, eq=False)
class _Checked:
    """A dense, checked joint path ready for timing, or the reason it failed."""

    segments: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = field(default_factory=list)
    cause: str | None = None
    failing: int | None = None
    message: str = ''
    q_end: np.ndarray | None = None


# Below the highest reachable point a rise stops short by this much [m]: at the edge of the
# workspace the elbow is nearly straight and the joints move fast for a small Cartesian step.
_REACH_MARGIN = 0.05
# A climbing cross reaches its cross height this share of the way to the target.
_CLIMB_SHARE = 0.4
# The least clearance [m] between a carried carton and the stack top a cross may take when
# the configured stack_clearance is out of the arm's reach (every sample is still checked).
_MIN_CROSS_CLEARANCE = 0.05


def _wrap_pi(a: float) -> float:
    return (a + math.pi) % TWO_PI - math.pi


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
        if checked.cause is not None:
            return MotionResult(
                False, checked.cause, checked.failing, None, wps, message=checked.message
            )
        return MotionResult(True, None, None, self._time(checked), wps)

    def plan_pick(
        self,
        q_start: np.ndarray,
        carton: CartonPose,
        world: CollisionWorld | None = None,
        mass: float | None = None,
        grasp: Grasp | None = None,
    ) -> MotionResult:
        """Rise, cross at transit height, descend onto the lid (+ cup gap); then the lift.

        The cup block is `grasp` when given, else the cup-block rule (docs/cell.md §3.10) on the
        carton's dims (and mass when known); its off-centre offset is cancelled in the commanded
        TCP from the approach onward (same section).
        """
        p = self.params
        q0 = np.asarray(q_start, dtype=float)
        L, W, H = carton.dims
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
        x0, y0, z0, yaw0 = self._tcp(q0)
        yaw = self._choose_yaw(q0, yaw0, carton.yaw, carton.x, carton.y)
        off = tool_to_world_xy(grasp.offset, yaw)
        tx, ty = carton.x - off[0], carton.y - off[1]
        seal_z = carton.z + H / 2 + p.cup_gap
        hf_top = self._stack_top(world)
        safe_z = max(p.transit_height, seal_z + p.place_clearance, hf_top + p.stack_clearance)
        load = CarriedLoad((L, W, H), grasp.offset)
        lift_z = max(safe_z, hf_top + H + p.cup_gap + p.stack_clearance)
        res = None
        for fit in (False, True):
            approach = self._over_and_down(
                q0, x0, y0, z0, yaw0, tx, ty, yaw, safe_z, seal_z, 'seal', fit=fit
            )
            if fit:
                # As high as the arm reaches above the source (a tall stack's clearance over
                # a far source): the place then climbs on its way.
                lift_z = self._rise_limit(q0, tx, ty, yaw, safe_z, lift_z)
            lift = (Waypoint(tx, ty, lift_z, yaw, None, 'lift'),)
            res = self._two_phase(q0, approach, None, lift, load, world, grasp)
            if res.cause != IK_UNREACHABLE:
                break
        return res

    def plan_place(
        self,
        q_start: np.ndarray,
        target: CartonPose,
        grasp: Grasp,
        world: CollisionWorld | None = None,
    ) -> MotionResult:
        """Rise, cross above the stack, descend to the release height; then the retract.

        Release height = target centre z + H/2 + cup gap + drop clearance (docs/cell.md §3.11).
        The cross height clears the height map's top by the carried carton's height plus stack
        clearance; where the arm does not reach that on the way, by as much as it reaches (at
        least _MIN_CROSS_CLEARANCE), the plan's second try.
        """
        p = self.params
        q0 = np.asarray(q_start, dtype=float)
        L, W, H = target.dims
        x0, y0, z0, yaw0 = self._tcp(q0)
        yaw = self._choose_yaw(q0, yaw0, target.yaw, target.x, target.y)
        off = tool_to_world_xy(grasp.offset, yaw)
        tx, ty = target.x - off[0], target.y - off[1]
        release_z = target.z + H / 2 + p.cup_gap + p.drop_clearance
        hf_top = self._stack_top(world)
        low_z = max(p.transit_height, release_z + p.place_clearance)
        safe_z = max(low_z, hf_top + H + p.cup_gap + p.stack_clearance)
        # The empty cups retract only to the approach height above the placed carton: the next
        # move rises from there (its collision world holds the carton), on a rounded corner.
        retract = (Waypoint(tx, ty, release_z + p.place_clearance, yaw, None, 'retract'),)
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
        vias = [(vx, vy) for vx, vy, _ in self._around_base(x0, y0, tx, ty)]
        probes = [(x0 + f * (tx - x0), y0 + f * (ty - y0)) for f in (0.25, 0.5, 0.75, 1.0)]
        safe_z = self._reach_limit(
            q0,
            probes + vias,
            yaw,
            max(low_z, hf_top + H + p.cup_gap + _MIN_CROSS_CLEARANCE),
            safe_z,
        )
        # A start above that (a lift as high as the source allowed) keeps its height across
        # only where the arm reaches it on the way; else the cross descends to safe_z.
        hold = z0 <= safe_z or self._reach_limit(q0, probes + vias, yaw, safe_z, z0) >= z0
        approach = self._over_and_down(
            q0, x0, y0, z0, yaw0, tx, ty, yaw, safe_z, release_z, 'release', hold, fit=True
        )
        return self._two_phase(q0, approach, load, retract, None, world, grasp)

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
        wps = []
        if z0 < safe_z - 1e-6:
            wps.append(Waypoint(x0, y0, safe_z, yaw0, None, 'rise'))
            z0 = safe_z
        z1 = max(z, safe_z)
        vias = self._around_base(x0, y0, x, y)
        for vx, vy, f in vias:
            wps.append(
                Waypoint(vx, vy, z0 + f * (z1 - z0), yaw0 + f * (yaw1 - yaw0), None, 'around')
            )
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

    def _stack_top(self, world: CollisionWorld | None) -> float:
        if world is None:
            return self.params.deck_z
        return world.stack_top(self.params.deck_z)

    def _rise_limit(
        self, q_ref: np.ndarray, x: float, y: float, yaw: float, z_lo: float, z_hi: float
    ) -> float:
        """z_hi when the tool reaches it tool-down at (x, y); else the highest reachable z
        above z_lo (bisection on the analytic IK) less _REACH_MARGIN, at least z_lo."""
        return self._reach_limit(q_ref, [(x, y)], yaw, z_lo, z_hi)

    def _reach_limit(
        self,
        q_ref: np.ndarray,
        points: list[tuple[float, float]],
        yaw: float,
        z_lo: float,
        z_hi: float,
    ) -> float:
        """_rise_limit for every (x, y) of `points` at once: the highest z they all reach."""

        def reaches(z: float) -> bool:
            return all(
                self.kin.ik_nearest(tool_down(x, y, z, yaw), q_ref) is not None for x, y in points
            )

        if z_hi <= z_lo or reaches(z_hi):
            return z_hi
        if not reaches(z_lo):
            return z_lo  # the dense check reports it
        lo, hi = z_lo, z_hi
        while hi - lo > 0.005:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if reaches(mid) else (lo, mid)
        return max(z_lo, lo - _REACH_MARGIN)

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
    ) -> tuple[Waypoint, ...]:
        """Vertical rise, cross at max(safe_z, current z), fast drop to final_z + clearance,
        final descent at approach speed.

        With `fit` (the plans' second try after an unreachable first): where the arm cannot
        rise to the cross height where it stands (level 16: a 1.0 m stack asks 1.43 m above
        the table station, which the UR10e reaches only to ~1.40 m), it rises as high as it
        reaches and climbs over the first part of the cross (to the first via round the base,
        else _CLIMB_SHARE of the way); the swept checks say whether the stack allows that.
        hold=False: a start above safe_z crosses down to safe_z instead of keeping its height.
        """
        p = self.params
        z_cross = max(safe_z, z0) if hold else safe_z
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
            wps.append(
                Waypoint(
                    x0 + f * (tx - x0),
                    y0 + f * (ty - y0),
                    z_cross,
                    yaw0 + f * _wrap_pi(yaw - yaw0),
                    None,
                    'climb',
                )
            )
        for vx, vy, f in vias:
            wps.append(Waypoint(vx, vy, z_cross, yaw0 + f * _wrap_pi(yaw - yaw0), None, 'around'))
        wps.append(Waypoint(tx, ty, z_cross, yaw, None, 'cross'))
        pre_z = final_z + p.place_clearance
        if z_cross > pre_z + 0.01:
            wps.append(Waypoint(tx, ty, pre_z, yaw, None, 'pre_' + final_name))
        wps.append(Waypoint(tx, ty, final_z, yaw, p.approach_speed, final_name))
        return tuple(wps)

    def _around_base(
        self, x0: float, y0: float, x1: float, y1: float
    ) -> list[tuple[float, float, float]]:
        """Via points (x, y, fraction of the way) that keep a cross away from the base axis.

        A straight cross that passes within base_clearance of the robot's vertical axis goes
        through the shoulder singularity; it is replaced by chords of an arc around the base
        (the shorter way round), each chord's midpoint still outside the clearance radius.
        """
        bx, by = self.kin.base_xyz[0], self.kin.base_xyz[1]
        r_safe = self.params.base_clearance
        d = np.array([x1 - x0, y1 - y0])
        L2 = float(d @ d)
        if L2 < 1e-12:
            return []
        u = float(np.clip(((bx - x0) * d[0] + (by - y0) * d[1]) / L2, 0.0, 1.0))
        if math.hypot(x0 + u * d[0] - bx, y0 + u * d[1] - by) >= r_safe:
            return []
        a0 = math.atan2(y0 - by, x0 - bx)
        a1 = math.atan2(y1 - by, x1 - bx)
        sweep = _wrap_pi(a1 - a0)
        # Hug the base: the arc's radius is just outside the clearance, so the detour stays
        # away from the furniture farther out (the trailer's walls).
        radius = r_safe / math.cos(math.radians(20.0))

        def chord_clear(p: tuple[float, float], q: tuple[float, float]) -> bool:
            dx, dy = q[0] - p[0], q[1] - p[1]
            n2 = dx * dx + dy * dy
            t = (
                0.0
                if n2 < 1e-12
                else min(1.0, max(0.0, ((bx - p[0]) * dx + (by - p[1]) * dy) / n2))
            )
            return math.hypot(p[0] + t * dx - bx, p[1] + t * dy - by) >= r_safe * 0.999

        vias: list[tuple[float, float, float]] = []
        for n in range(1, 13):
            vias = [
                (
                    bx + radius * math.cos(a0 + sweep * k / (n + 1)),
                    by + radius * math.sin(a0 + sweep * k / (n + 1)),
                    k / (n + 1),
                )
                for k in range(1, n + 1)
            ]
            pts = [(x0, y0), *((v[0], v[1]) for v in vias), (x1, y1)]
            if all(chord_clear(a, b) for a, b in zip(pts, pts[1:], strict=False)):
                break
        return vias

    def _choose_yaw(
        self, q0: np.ndarray, yaw0: float, target_yaw: float, x: float, y: float
    ) -> float:
        """Tool yaw for a box at `target_yaw`: any target + k pi (a box is symmetric under a half
        turn). Prefer the smallest turn from the current yaw whose predicted wrist-3 angle keeps
        0.3 rad from its limits; q6 follows q1 - yaw in the working family."""
        lo, hi = self.kin.limits.lower[5] + 0.3, self.kin.limits.upper[5] - 0.3
        cands = []
        for k in range(-3, 4):
            c = yaw0 + _wrap_pi(target_yaw - yaw0) + k * math.pi
            if abs(c - yaw0) <= math.pi + 1e-9:
                cands.append(c)
        best, best_cost = cands[0], math.inf
        base_dir = math.atan2(y - self.kin.base_xyz[1], x - self.kin.base_xyz[0])
        q = self.kin.ik_nearest(tool_down(x, y, self.params.transit_height, target_yaw), q0)
        dq1 = float(q[0] - q0[0]) if q is not None else _wrap_pi(base_dir - (q0[0] + math.pi / 2))
        for c in cands:
            q6 = q0[5] + dq1 - (c - yaw0)
            cost = abs(c - yaw0) + (10.0 if not lo <= q6 <= hi else 0.0)
            if cost < best_cost - 1e-9:
                best, best_cost = c, cost
        return best

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
        wps = first + second
        a = self._check(q0, first, world, first_load, 0)
        if a.cause is not None:
            return MotionResult(
                False, a.cause, a.failing, None, wps, grasp=grasp, message=a.message
            )
        b = self._check(a.q_end, second, world, second_load, len(first))
        if b.cause is not None:
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
    ) -> _Checked:
        """_check_once with rounded corners; when that fails, with a stop at every corner."""
        # Rounded corners suit the time-optimal timings, which slow only where the curvature
        # needs it; a ruckig segment would run at its corners' speed throughout.
        ruckig = self.params.timing == 'ruckig'
        first = self._check_once(q0, wps, world, load, index0, not ruckig)
        if ruckig:
            return first
        if first.cause is None:
            return first
        return self._check_once(q0, wps, world, load, index0, False)

    def _blended_path(
        self, legs: list[tuple], accel: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A polyline of legs with its corners rounded: (poses (n+1, 4), arc length s (n+1,),
        local leg index (n+1,), speed cap (n+1,)) on a uniform arc-length grid.

        Each corner between non-collinear legs becomes a quartic Bezier from blend_radius
        before the corner to blend_radius after it (at most 40 % of either leg), its first and
        last three control points on the legs: tangent to both with zero curvature where it
        meets them, so the joint accelerations have no step there. The speed cap is the leg's transit or approach speed, the yaw rate limit,
        and sqrt(accel / curvature) so the rounded corner's centripetal acceleration stays
        within the Cartesian bound.
        """
        p = self.params
        return kern.blend_path(
            np.array([legs[0][0]] + [leg[1] for leg in legs], dtype=float),
            np.array([leg[2] for leg in legs], dtype=float),
            np.array([leg[8] for leg in legs], dtype=float),
            float(p.blend_radius),
            float(p.path_step),
            float(p.path_step_yaw),
            float(p.angular_speed),
            float(accel),
        )

    def _check_once(
        self,
        q0: np.ndarray,
        wps: tuple[Waypoint, ...],
        world: CollisionWorld | None,
        load: CarriedLoad | None,
        index0: int,
        blend: bool = True,
    ) -> _Checked:
        """Dense IK with branch continuity, limits and collisions for every sample of every
        segment. Failing waypoints are reported as index0 + local index.

        With `blend`, transit corners are rounded (MotionParams.blend_radius) so the arm does
        not stop there; a blended path that fails a check is checked again with every corner
        a stop, and that result stands.
        """
        p = self.params
        if not wps:
            raise MotionError('a motion needs at least one waypoint')
        x0, y0, z0, yaw0 = self._tcp(q0)
        prev = np.array([x0, y0, z0, yaw0])
        r_yaw = p.cartesian_speed / p.angular_speed  # [m/rad]: yaw folded into the path length
        # Per waypoint: end pose, Cartesian length, speed bound and acceleration scale.
        legs = []
        for k, wp in enumerate(wps):
            for name, v in (('x', wp.x), ('y', wp.y), ('z', wp.z), ('yaw', wp.yaw)):
                if not math.isfinite(v):
                    raise MotionError(f'waypoint {index0 + k} ({wp.name}) {name} = {v!r}')
            yaw = prev[3] + _wrap_pi(wp.yaw - prev[3])
            nxt = np.array([wp.x, wp.y, wp.z, yaw])
            dist = float(np.linalg.norm(nxt[:3] - prev[:3]))
            dyaw = abs(float(nxt[3] - prev[3]))
            length = max(dist, r_yaw * dyaw)
            speed = p.cartesian_speed if wp.speed is None else wp.speed
            vel = [speed * length / dist] if dist > 0 else []
            if dyaw > 0:
                vel.append(p.angular_speed * length / dyaw)
            # Pure turns use cartesian_accel / r_yaw as the angular limit: 1 in s units.
            scale = length / dist if dist > 0 else 1.0
            legs.append(
                (
                    prev,
                    nxt,
                    dist,
                    dyaw,
                    length,
                    min(vel) if vel else speed,
                    scale,
                    wp.speed is None,
                    speed,
                )
            )
            prev = nxt
        # Straight legs that continue in the same direction without turning (a fast drop then
        # the slow final descent) form one segment: the speed changes without a stop.
        groups: list[list[int]] = []
        blended: list[bool] = []
        for k, leg in enumerate(legs):
            if groups and leg[2] > 0:
                last = legs[groups[-1][-1]]
                if last[2] > 0:
                    d0 = (last[1][:3] - last[0][:3]) / last[2]
                    d1 = (leg[1][:3] - leg[0][:3]) / leg[2]
                    if leg[3] == 0.0 and last[3] == 0.0 and float(d0 @ d1) > 1 - 1e-9:
                        groups[-1].append(k)
                        continue
                    # A transit corner turning by less than 120 deg between legs that move
                    # more than they turn the tool is rounded, not stopped at.
                    if (
                        blend
                        and p.blend_radius > 0
                        and leg[7]
                        and last[7]
                        and float(d0 @ d1) > -0.5
                        and r_yaw * leg[3] <= leg[2]
                        and r_yaw * last[3] <= last[2]
                    ):
                        groups[-1].append(k)
                        blended[-1] = True
                        continue
            groups.append([k])
            blended.append(False)
        poses, seg_of, grp_of, seg_info = [legs[0][0][None, :]], [np.array([0])], [[0]], []
        for g, members in enumerate(groups):
            if blended[g]:
                base_accel = p.cartesian_accel if load is not None else p.empty_accel
                bp, bs, bleg, bcap = self._blended_path([legs[k] for k in members], base_accel)
                poses.append(bp[1:])
                seg_of.append(np.asarray(members)[bleg[1:]])
                grp_of.append(np.full(len(bp) - 1, g))
                seg_info.append((bs, bcap, base_accel))
                continue
            start, end = legs[members[0]][0], legs[members[-1]][1]
            ends = np.cumsum([legs[k][4] for k in members])
            length = float(ends[-1])
            dist = sum(legs[k][2] for k in members)
            dyaw = sum(legs[k][3] for k in members)
            # At least 2 intervals: the timing needs second differences on every segment.
            n = max(math.ceil(dist / p.path_step), math.ceil(dyaw / p.path_step_yaw), 2)
            u = np.linspace(0.0, 1.0, n + 1)
            poses.append(start + u[1:, None] * (end - start))
            s = u * length
            local = np.minimum(np.searchsorted(ends, s[1:] - 1e-12), len(members) - 1)
            seg_of.append(np.asarray(members)[local])
            grp_of.append(np.full(n, g))
            # Speed bound of each interval: the slowest leg it overlaps; of each grid point:
            # the slower of its two intervals.
            cap_int = np.full(n, np.inf)
            lo = np.concatenate([[0.0], ends[:-1]])
            for r, k in enumerate(members):
                touch = (s[:-1] < ends[r] - 1e-12) & (s[1:] > lo[r] + 1e-12)
                cap_int[touch] = np.minimum(cap_int[touch], legs[k][5])
            cap = np.minimum(np.append(cap_int, cap_int[-1]), np.insert(cap_int, 0, cap_int[0]))
            base_accel = p.cartesian_accel if load is not None else p.empty_accel
            accel = base_accel * (legs[members[0]][6] if len(members) == 1 else 1.0)
            seg_info.append((s, cap, accel))
        pose_arr = np.concatenate(poses)
        seg_idx = np.concatenate(seg_of)
        grp_idx = np.concatenate(grp_of)
        # Branch of the start configuration, then follow that analytic branch along the path.
        if not branch_family(q0):
            return _Checked(
                cause=IK_UNREACHABLE,
                failing=index0,
                message='start configuration is outside the elbow-up, wrist-not-flipped family',
            )
        b = branch_index(q0)
        # The start may be off exact tool-down by up to 1e-4 rad (rounded joint values): the
        # residual fades out over the first segment so the path starts exactly at q0.
        q, bad, start_err = kern.follow_branch(
            np.ascontiguousarray(pose_arr, dtype=float),
            self.kin._T_base_world,  # type: ignore[attr-defined]
            self.kin._T_tcp_flange,  # type: ignore[attr-defined]
            b,
            np.asarray(q0, dtype=float),
            int(np.count_nonzero(seg_idx == 0)),
            self.kin._lower,  # type: ignore[attr-defined]
            self.kin._upper,  # type: ignore[attr-defined]
            float(p.max_joint_step),
            *DH_ARRAYS,
        )
        if start_err > 1e-3 and math.isfinite(start_err):
            raise MotionError(f'start configuration {q0.tolist()} is not on IK branch {b}')

        def failed(cause: str, i: int, what: str) -> _Checked:
            k = int(seg_idx[i])
            x, y, z, yw = pose_arr[i]
            where = f'({x:.3f}, {y:.3f}, {z:.3f}, yaw {yw:.3f})'
            return _Checked(
                cause=cause,
                failing=index0 + k,
                message=f'{what} {where} on the way to waypoint {index0 + k} ({wps[k].name})',
            )

        if bad.any():
            return failed(
                IK_UNREACHABLE, int(np.argmax(bad)), 'no branch-continuous in-limit IK at'
            )
        # The tool-and-carton checks do not see the arm: level 12 seed 1 (grid planner) drove
        # wrist 1 into the base placing 0.43 m from the base axis, 0.25 m above the deck.
        near = wrist_near_mount(
            q, p.pedestal_radius, p.base_radius, p.shoulder_height, p.link_radius
        )
        if near.any():
            i = int(np.argmax(near))
            return failed(COLLISION, i, 'the wrist would strike the robot base or pedestal at')
        if world is not None and world.arm_boxes:
            # Level 12 (seeds 1, 11, 31, 40): placing at the pallet corner by the pick table,
            # wrist 2 struck the table's top edge.
            lo = np.array([b.lo for b in world.arm_boxes], dtype=float)
            hi = np.array([b.hi for b in world.arm_boxes], dtype=float)
            box = arm_box_hits(q, self.kin.T_world_base, lo, hi, p.arm_margin)
            if (box >= 0).any():
                i = int(np.argmax(box >= 0))
                name = world.arm_boxes[int(box[i])].name
                return failed(COLLISION, i, f'the arm would strike the {name} at')
        if world is not None:
            hit = first_collision(
                pose_arr,
                world,
                self.gripper.body,
                p.cup_gap,
                load,
                p.collision_tolerance,
                grow=p.path_step / 2,
            )
            if hit is not None:
                i, what = hit
                swept = f'swept tool{" and carton" if load else ""} hits {what} at'
                return failed(COLLISION, i, swept)
        segments = []
        for g, (s, cap, accel) in enumerate(seg_info):
            sel = np.concatenate([[False], grp_idx[1:] == g])
            first = int(np.argmax(sel)) - 1  # include the previous segment's last sample
            q_seg = q[first : first + int(sel.sum()) + 1]
            segments.append((s, q_seg, cap, accel))
        return _Checked(segments=segments, q_end=q[-1].copy())

    def _time(self, checked: _Checked) -> JointTrajectory:
        p = self.params
        if p.timing == 'ruckig':
            # Ruckig on each segment's path coordinate: one speed, acceleration and jerk
            # bound for the whole segment (its slowest stretch), jerk-limited throughout.
            timings = [
                time_segment(
                    s,
                    q,
                    PathLimits(
                        float(np.min(cap)), acc, p.cartesian_jerk * acc / p.cartesian_accel
                    ),
                    p.limits,
                    p.curvature_share,
                )
                for s, q, cap, acc in checked.segments
            ]
        else:
            smooth = p.timing == 'jerk_limited'
            timings = [
                time_optimal(s, q, cap, acc, p.limits, None, smooth)
                for s, q, cap, acc in checked.segments
            ]
        return sample_segments(timings, p.limits, p.rate_hz, p.timing != 'time_optimal')
