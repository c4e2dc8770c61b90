"""Score heuristic: every window of the height map scored by 14 terms, vectorised.

This module holds the planner, ScorePlanner: it walks the ranked candidates, skipping excluded
slots, unreachable ones (reach asked lazily), those taking the reserve box's last room and those
that would leave the believed stack toppling. The rest of the heuristic lies beside it:
heuristic_rejects.py (RejectReason, the hard filters in precedence order), heuristic_windows.py
(the per-footprint window quantities) and heuristic_candidates.py (Candidates, score_candidates:
filter, score and rank); RejectReason, REJECT_REASONS, Candidates and score_candidates are
re-exported here. Rules and values: docs/planners.md §6.2-6.5.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from palletizer.core.contracts import (
    HeightMap,
    PackageSpec,
    PalletGeometry,
    PalletState,
    Placement,
    PlacementPlan,
    PlanResult,
)
from palletizer.core.measure import measure_placement, world_to_pallet
from palletizer.core.params.planning import TERMS, HeuristicParams
from palletizer.core.planning.base import LayerBook, PlannerKind
from palletizer.core.planning.heuristic_candidates import (
    REACH_NOT_ASKED,
    REACHABLE,
    UNREACHABLE,
    Candidates,
    score_candidates,
)
from palletizer.core.planning.heuristic_rejects import (
    EXCLUDED,
    PALLET_SPEC,
    REJECT_REASONS,
    UNSTABLE_STACK,
    RejectReason,
)
from palletizer.core.planning.reach import ReachOracle
from palletizer.core.planning.spec_rules import SpecRules
from palletizer.core.planning.stack import stack_from_placements
from palletizer.core.planning.tool import GripperGeometry, tcp_shifts
from palletizer.core.stability import StackBox, validate_stack

__all__ = ['REJECT_REASONS', 'Candidates', 'RejectReason', 'ScorePlanner', 'score_candidates']


def _reachable(
    reach: ReachOracle,
    x: np.ndarray,
    y: np.ndarray,
    z_tcp: np.ndarray,
    yaw: np.ndarray,
    p: HeuristicParams,
    shifts: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> np.ndarray:
    """The release pose, and the pose approach_height above it when that is > 0, at the
    carton centre (x, y) moved by each of `shifts` (tool.tcp_shifts: where the TCP stands;
    None: the centre)."""
    n = len(x)
    shifts = shifts or [(np.zeros(n), np.zeros(n))]
    heights = [z_tcp] if p.approach_height <= 0.0 else [z_tcp, z_tcp + p.approach_height]
    xs = [x + dx for dx, _ in shifts for _ in heights]
    ys = [y + dy for _, dy in shifts for _ in heights]
    zs = [z for _ in shifts for z in heights]
    ok = reach.reachable(
        np.concatenate(xs), np.concatenate(ys), np.concatenate(zs), np.tile(yaw, len(xs))
    )
    return cast(np.ndarray, np.asarray(ok, dtype=bool).reshape(len(xs), n).all(axis=0))


class ScorePlanner:
    """The score heuristic as a Planner (docs/planners.md §6.2-6.5).

    Reads only the height map, the carton spec and measured placements, so it is not an oracle.
    With a reach oracle and a zero reachability weight, reach is asked lazily in rank order
    (the oracle is the expensive part): out_of_reach then counts the unreachable candidates
    examined, and candidates already failing a lower-precedence filter are not asked.
    The last scored candidate set is cached by (spec, map bytes, pallet state, recorded stack):
    a replan that only adds excluded slots walks further down the same ranking.
    `enumerations` counts full enumerations (for tests and benchmarks). With `tool`, a window
    where the gripper body would reach over a neighbour above the new lid is a collision
    (core.planning.tool). With `rules` (core.planning.spec_rules), a candidate that breaks a
    hard rule of the pallet spec is refused (counted as `pallet_spec`).
    """

    kind = PlannerKind.heuristic
    oracle = False

    def __init__(
        self,
        params: HeuristicParams | None = None,
        *,
        reach: ReachOracle | None = None,
        pallet: PalletGeometry | None = None,
        tool: GripperGeometry | None = None,
        rules: SpecRules | None = None,
    ) -> None:
        self.params = params or HeuristicParams()
        self.reach = reach
        self.tool = tool
        self.rules = rules
        self.pallet = pallet or PalletGeometry()
        self.book = LayerBook(self.pallet)
        self.enumerations = 0
        self._cache_key: tuple[object, ...] | None = None
        self._cache: Candidates | None = None

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None:
        """The heuristic has no lookahead; the forecast is ignored."""

    def record(self, placement: Placement) -> None:
        self.book.record(placement)

    def candidates(
        self, spec: PackageSpec, heightmap: HeightMap, pallet: PalletState | None
    ) -> Candidates:
        """The ranked valid candidates (cached, see the class docstring)."""
        key = (spec, heightmap.key(), pallet, self.book.version)
        if key != self._cache_key or self._cache is None:
            self._cache = self._score(spec, heightmap, pallet)
            self._cache_key = key
            self.enumerations += 1
        return self._cache

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
        last_resort: bool = False,
    ) -> PlanResult:
        """The best valid slot for `spec`, or none with the reject counts.

        last_resort: the episode ends unless this carton finds a slot (the buffer has no place
        for it, or the load is done and it waits there): when the usual rules find none, each
        of params.last_resort_support is tried in turn as the least support ratio, the reserve
        kept no longer (the stack check still applies); the plan's predicted_support says
        how much it found.
        """
        self.book.remember(spec)
        cands = self.candidates(spec, heightmap, pallet)
        found = self._walk(spec, heightmap, pallet, cands, excluded_slots, keep_room=True)
        if found.plan is not None or not last_resort:
            return found
        for ratio in self.params.last_resort_support:
            relaxed = dataclasses.replace(
                self.params, min_support_ratio=ratio, last_resort_support=()
            )
            more = self._score(spec, heightmap, pallet, relaxed)
            got = self._walk(spec, heightmap, pallet, more, excluded_slots, keep_room=False)
            if got.plan is not None:
                return PlanResult(got.plan, found.reject_summary)
        return found

    def _walk(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        cands: Candidates,
        excluded_slots: Collection[str],
        keep_room: bool,
    ) -> PlanResult:
        """The first valid slot down the ranking of `cands` (see the class docstring); with
        keep_room, the best that leaves the reserve box a slot while the map has one."""
        excluded = set(excluded_slots)
        near = _near_excluded(excluded, self.params.exclude_radius)
        n_excluded = 0
        unstable = 0
        broken = 0
        chunk = 32
        tries = self.params.reserve_tries if keep_room and not self._reserve_sized(spec) else 0
        room: _Rooms | None = None  # the reserve box's slots on the map now
        best: PlacementPlan | None = None  # the best valid slot, if none tried keeps room
        crowded = 0
        for k in range(len(cands.score)):
            layer = self.book.layer(float(cands.z_base[k]))
            slot = f'score-L{layer}-{cands.i0[k]}x{cands.j0[k]}'
            if slot in excluded or (near and near(layer, int(cands.i0[k]), int(cands.j0[k]))):
                n_excluded += 1
                continue
            state = cands.reach_state
            if state is not None:
                if state[k] == REACH_NOT_ASKED:
                    self._ask_reach(spec, cands, k, chunk)
                    chunk = min(4 * chunk, 4096)  # the best is usually reachable: start small
                if state[k] == UNREACHABLE:
                    continue
            crowds = False  # the slot takes the reserve box's last room
            if tries > 0:
                if room is None:
                    room = self._reserve_rooms(heightmap, pallet)
                crowds = len(room.x) > 0 and not room.left_by(
                    float(cands.x[k]), float(cands.y[k]), float(cands.yaw[k]), spec.dims_m
                )
            if crowds and best is not None:
                crowded += 1
                if crowded >= tries:
                    break
                continue
            zc = self.pallet.deck_z + float(cands.z_base[k]) + spec.dims_m[2] / 2.0
            # The spec's rules before the stack check: they are the cheaper of the two.
            if self.rules is not None and self.rules.breaks(
                self.book.placements,
                self.rules.item(
                    spec,
                    world_to_pallet(
                        (float(cands.x[k]), float(cands.y[k]), zc, float(cands.yaw[k])),
                        self.pallet,
                    ),
                ),
            ):
                broken += 1
                continue
            if self.params.stack_check and not self._stable(spec, cands, k, layer, zc):
                unstable += 1
                continue
            plan = PlacementPlan(
                position=(float(cands.x[k]), float(cands.y[k]), zc),
                yaw=float(cands.yaw[k]),
                layer=layer,
                slot=slot,
                score=float(cands.score[k]),
                predicted_support=float(min(1.0, cands.support[k])),
                breakdown={t: float(cands.terms[k, i]) for i, t in enumerate(TERMS)},
            )
            if crowds:
                best = plan
                crowded += 1
                if crowded >= tries:
                    break
                continue
            return PlanResult(plan, self._summary(cands))
        if best is not None:
            return PlanResult(best, self._summary(cands))
        summary = self._summary(cands)
        if n_excluded:
            summary[EXCLUDED] = n_excluded
        if unstable:
            summary[UNSTABLE_STACK] = unstable
        if broken:
            summary[PALLET_SPEC] = broken
        return PlanResult(None, summary)

    def _score(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        params: HeuristicParams | None = None,
    ) -> Candidates:
        mass, cog = (pallet.mass_kg, pallet.cog) if pallet is not None else self.book.state()
        cands = score_candidates(
            spec,
            heightmap,
            params or self.params,
            pallet_mass=mass,
            pallet_cog=cog,
            geometry=self.pallet,
            reach=self.reach,
            tool=self.tool,
        )
        if self.rules is None or not self.rules.scores or not len(cands.score):
            return cands
        # The spec's soft rules lower each candidate's score; the ranking follows (stable, so
        # the tie-break stands among equals).
        cx, cy = self.pallet.centre_xy
        score = cands.score - self.rules.penalty(
            self.book.placements, spec, cands.x - cx, cands.y - cy, cands.yaw, cands.z_base
        )
        order = np.argsort(-score, kind='stable')
        arrays = {
            f: getattr(cands, f)[order]
            for f in ('z_base', 'x', 'y', 'yaw', 'i0', 'j0', 'support', 'terms')
        }
        state = None if cands.reach_state is None else cands.reach_state[order]
        return dataclasses.replace(cands, score=score[order], reach_state=state, **arrays)

    def _reserve_sized(self, spec: PackageSpec) -> bool:
        """Whether the carton is itself nearly the reserve's size (each side of its footprint at
        least RESERVE_SIZED of the reserve's): the room is kept for such a carton, so it may
        take it. Else the room-keeping rule pushed it onto the stack: level 33 seed 37 (cameras)
        set a 0.52 x 0.33 m, 7.5 kg carton fifth high beside a free floor room, and the tower
        fell."""
        mine = sorted(spec.dims_m[:2], reverse=True)
        room = sorted(self.params.reserve[:2], reverse=True)
        return all(a >= RESERVE_SIZED * b for a, b in zip(mine, room, strict=True))

    def _room_for_reserve(self, heightmap: HeightMap, pallet: PalletState | None) -> bool:
        """Whether the map has a valid, reachable slot for a box of the reserve's size."""
        return len(self._reserve_rooms(heightmap, pallet).x) > 0

    def _reserve_rooms(self, heightmap: HeightMap, pallet: PalletState | None) -> _Rooms:
        """Every valid, reachable slot for a box of the reserve's size on the map."""
        L, W, H = self.params.reserve
        spec = PackageSpec('reserve', 'reserve', (L, W, H), 1.0)
        cands = self._score(spec, heightmap, pallet)
        ok = np.ones(len(cands.score), dtype=bool)
        if cands.reach_state is not None and len(ok):
            self._ask_reach(spec, cands, 0, len(ok))
            ok = cands.reach_state == REACHABLE
        c, s = np.abs(np.cos(cands.yaw[ok])), np.abs(np.sin(cands.yaw[ok]))
        # A box placed later must keep clear of the window and its ring; one cell more covers
        # the rasterised footprint.
        margin = self.params.clearance + heightmap.cell_size
        return _Rooms(
            cands.x[ok],
            cands.y[ok],
            (L * c + W * s) / 2.0 + margin,
            (L * s + W * c) / 2.0 + margin,
        )

    def _stable(self, spec: PackageSpec, cands: Candidates, k: int, layer: int, zc: float) -> bool:
        """Whether the stack as believed, plus `spec` at candidate k, stands quasi-statically:
        every box's load resultant inside its contact hull (min margin 0; support, overlaps and
        heights are the candidate filters' business)."""
        if not self.book.placements:
            return True
        new = self._placement(spec, cands, k, layer, zc)
        stack = stack_from_placements([*self.book.placements, new], self.book.specs)
        stack = _seat(stack, self.params.support_tol + _CONTACT_TOL)
        check = validate_stack(stack, min_support=0.0, min_margin=0.0, check_overlaps=False)
        return check.ok or check.reason != 'margin'

    def _placement(
        self, spec: PackageSpec, cands: Candidates, k: int, layer: int, zc: float
    ) -> Placement:
        """The carton at candidate k as a placement on the believed stack (pallet frame)."""
        pose = world_to_pallet(
            (float(cands.x[k]), float(cands.y[k]), zc, float(cands.yaw[k])), self.pallet
        )
        return measure_placement(
            len(self.book.placements),
            spec,
            layer,
            pose,
            pose,
            self.book.placements,
            pallet=self.pallet,
        )

    def _ask_reach(self, spec: PackageSpec, cands: Candidates, k: int, n: int) -> None:
        """Ask the oracle about up to n not-yet-asked candidates from rank k on."""
        state = cands.reach_state
        assert state is not None and self.reach is not None
        todo = np.flatnonzero(state[k:] == REACH_NOT_ASKED)[:n] + k
        z = self.pallet.deck_z + cands.z_base[todo] + spec.dims_m[2]
        z = z + self.params.cup_gap + self.params.drop_clearance
        L, W, _ = spec.dims_m
        yaw = cands.yaw[todo]
        shifts = tcp_shifts(L, W, yaw, self.tool)
        ok = _reachable(self.reach, cands.x[todo], cands.y[todo], z, yaw, self.params, shifts)
        state[todo] = np.where(ok, REACHABLE, UNREACHABLE)

    @staticmethod
    def _summary(cands: Candidates) -> dict[str, int]:
        summary = dict(cands.reject_summary)
        if cands.reach_state is not None:
            unreachable = int(np.count_nonzero(cands.reach_state == UNREACHABLE))
            if unreachable:
                key = RejectReason.out_of_reach.name
                summary[key] = summary.get(key, 0) + unreachable
        return summary


def _near_excluded(
    excluded: Collection[str], radius: int
) -> Callable[[int, int, int], bool] | None:
    """(layer, i0, j0) -> whether a window lies within `radius` cells (both ways) of an
    excluded slot of its layer (names score-L<layer>-<i0>x<j0>); None when there is none."""
    if radius <= 0:
        return None
    spots: dict[int, list[tuple[int, int]]] = {}
    for name in excluded:
        m = _SLOT.fullmatch(name)
        if m:
            spots.setdefault(int(m[1]), []).append((int(m[2]), int(m[3])))
    if not spots:
        return None

    def near(layer: int, i0: int, j0: int) -> bool:
        return any(
            abs(i0 - i) <= radius and abs(j0 - j) <= radius for i, j in spots.get(layer, ())
        )

    return near


_SLOT = re.compile(r'score-L(\d+)-(\d+)x(\d+)')


@dataclass(frozen=True)
class _Rooms:
    """The reserve box's slots: centres x, y [world, m] and the half extents hx, hy [m] of the
    region a later box must keep out of for the slot to stay valid (window, ring, a cell)."""

    x: np.ndarray
    y: np.ndarray
    hx: np.ndarray
    hy: np.ndarray

    def left_by(self, x: float, y: float, yaw: float, dims: tuple[float, float, float]) -> bool:
        """Whether a slot stays free of a box of `dims` centred at (x, y) [world, m], turned
        by yaw [rad]. A slot the new box creates on its own lid is not counted (conservative)."""
        L, W, _ = dims
        c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
        ex, ey = (L * c + W * s) / 2.0, (L * s + W * c) / 2.0
        hit = (np.abs(self.x - x) < self.hx + ex) & (np.abs(self.y - y) < self.hy + ey)
        return not bool(hit.all())


# A carton whose footprint sides are each at least this share of the reserve's is the kind the
# room is kept for (heuristic.reserve 0.55 x 0.36 m: from 0.495 x 0.324 m).
RESERVE_SIZED = 0.9

# [m] stability's own contact tolerance (core.stability.validate_stack's default).
_CONTACT_TOL = 0.004


def _stamped(
    heightmap: HeightMap, plan: PlacementPlan, spec: PackageSpec, deck_z: float
) -> HeightMap:
    """The map with the cells whose centre lies under the planned box raised to its top
    (deck_z: the deck's world height [m])."""
    cells = np.array(heightmap.cells, dtype=float, copy=True)
    cs = heightmap.cell_size
    ox, oy = heightmap.origin
    L, W, H = spec.dims_m
    c, s = abs(math.cos(plan.yaw)), abs(math.sin(plan.yaw))
    ex, ey = L * c + W * s, L * s + W * c
    x, y, z = plan.position
    ny, nx = cells.shape
    i0 = max(0, math.ceil((x - ex / 2 - ox) / cs - 0.5 - 1e-9))
    i1 = min(nx, math.floor((x + ex / 2 - ox) / cs - 0.5 + 1e-9) + 1)
    j0 = max(0, math.ceil((y - ey / 2 - oy) / cs - 0.5 - 1e-9))
    j1 = min(ny, math.floor((y + ey / 2 - oy) / cs - 0.5 + 1e-9) + 1)
    top = z + H / 2 - deck_z
    cells[j0:j1, i0:i1] = np.maximum(cells[j0:j1, i0:i1], top)
    return HeightMap(cells, heightmap.observed, heightmap.origin, cs)


def _seat(boxes: Sequence[StackBox], tol: float) -> list[StackBox]:
    """The boxes with each base moved onto the highest top under it (another box's, or the
    deck) when it lies within `tol` above or below it: bases planned on the camera map carry
    its error (a few mm), which would leave a believed box floating or sunk."""
    out: list[StackBox] = []
    for b in sorted(boxes, key=lambda b: b.z):
        tops = [0.0] + [
            o.top
            for o in out
            if abs(o.x - b.x) < (o.ex + b.ex) / 2
            and abs(o.y - b.y) < (o.ey + b.ey) / 2
            and o.top <= b.z + tol
        ]
        top = max(tops)
        out.append(dataclasses.replace(b, z=top) if abs(b.z - top) <= tol else b)
    return out
