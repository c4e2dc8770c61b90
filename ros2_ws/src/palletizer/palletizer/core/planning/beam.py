"""Beam search over whole-stack quasi-static validation, with lookahead where a forecast exists."""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

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
from palletizer.core.params.planning import BEAM_TERMS, BeamParams
from palletizer.core.planning.base import LayerBook, PlannerKind
from palletizer.core.planning.heuristic_rejects import PALLET_SPEC
from palletizer.core.planning.reach import ReachOracle
from palletizer.core.planning.spec_rules import SpecRules
from palletizer.core.planning.stack import map_max_under, stack_from_placements
from palletizer.core.planning.tool import GripperGeometry, tcp_shifts, tool_half_extents
from palletizer.core.stability import StackBox, StackModel

# The names _slot gives: beam-L<layer>-<x>x<y>r<deg>, x and y in mm from the pallet centre.
_SLOT = re.compile(r'beam-L(\d+)-(-?\d+)x(-?\d+)r(-?\d+)')

__all__ = ['BeamPlanner', 'Move', 'expand']


@dataclass(frozen=True)
class Move:
    """One valid placement of one carton on a given stack (PALLET frame).

    box: the carton as placed; yaw [rad]; score: weighted sum of components;
    components: BEAM_TERMS -> value in [0, 1]; rank: index among the node's candidates.
    """

    box: StackBox
    yaw: float
    score: float
    components: dict[str, float]
    rank: int


def _axis_starts(size: float, half: float, lo: np.ndarray, hi: np.ndarray, c: float) -> np.ndarray:
    """Candidate low edges along one axis: the two rims, and against each box on both sides.

    No centred start (the reference had one): a first carton in the middle of the deck splits it
    into strips that the larger cartons of a load no longer fit (quasi-static, seeds 1-50,
    reference levels: 433 -> 441 of 450 episodes without it)."""
    rims = np.array([-half + c / 2.0, half - size - c / 2.0])
    sides = np.stack([lo - size - c, lo, hi - size, hi + c], axis=1).ravel()
    s = np.unique(np.round(np.concatenate((rims, sides)), 6))
    return s[(s >= -half - 1e-9) & (s + size <= half + 1e-9)]


def _surface_grid(
    boxes: Sequence[StackBox], samples: tuple[int, int], size: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample points (gx, gy) and the stack's top height at each (ny, nx) [m]."""
    nx, ny = samples
    xs = (np.arange(nx) + 0.5) / nx * size[0] - size[0] / 2
    ys = (np.arange(ny) + 0.5) / ny * size[1] - size[1] / 2
    gx, gy = np.meshgrid(xs, ys)
    if not boxes:
        return gx, gy, np.zeros_like(gx)
    # The highest top over each point (max is exact in any order), 0 where no box is.
    r = np.array([b.rect for b in boxes])[:, :, None, None]
    tops = np.array([b.top for b in boxes])[:, None, None]
    inside = (gx >= r[:, 0]) & (gx <= r[:, 1]) & (gy >= r[:, 2]) & (gy <= r[:, 3])
    return gx, gy, np.maximum(np.where(inside, tops, 0.0).max(axis=0), 0.0)


def _unit(v: float) -> float:
    """v clipped to [0, 1], as np.clip gives it for a finite double."""
    return min(max(v, 0.0), 1.0)


@functools.lru_cache(maxsize=256)
def _tool_reach(L: float, W: float, quarter: int, tool: GripperGeometry) -> tuple[float, float]:
    """tool_half_extents, once per carton size, turn and tool (a grasp plan each time)."""
    return tool_half_extents(L, W, quarter, tool)


def _under_tool(
    boxes: tuple[np.ndarray, ...],
    heightmap: HeightMap | None,
    pallet: PalletGeometry,
    params: BeamParams,
    tool: GripperGeometry,
    L: float,
    W: float,
    yaw_deg: float,
    starts: tuple[np.ndarray, np.ndarray],
    at: tuple[np.ndarray, np.ndarray],
    lid: np.ndarray,
) -> np.ndarray:
    """Per candidate (the low edges starts[0][at[0]], starts[1][at[1]] and the new lid height)
    on the stack's boxes (x0, x1, y0, y1, z, top columns): whether a box or map cell under the
    tool body stands above the lid by more than level_tol (boxes) or map_tol (the map)."""
    quarter = round(yaw_deg / 90.0) % 2
    ex, ey = (W, L) if quarter else (L, W)
    tx, ty = _tool_reach(L, W, quarter, tool)
    cx, cy = starts[0] + ex / 2, starts[1] + ey / 2
    tx0, tx1, ty0, ty1 = cx - tx, cx + tx, cy - ty, cy + ty
    ix, iy = at
    struck = np.zeros(len(ix), dtype=bool)
    bx0, bx1, by0, by1, _, top = boxes
    if len(top):
        # The tool's overlap with each box along one axis depends on that axis's start only.
        ux = np.minimum(tx1[:, None], bx1) - np.maximum(tx0[:, None], bx0) > 1e-6
        uy = np.minimum(ty1[:, None], by1) - np.maximum(ty0[:, None], by0) > 1e-6
        struck |= (ux[ix] & uy[iy] & (top > lid[:, None] + params.level_tol)).any(axis=1)
    if heightmap is not None:
        mm = map_max_under(heightmap, tx0[ix], tx1[ix], ty0[iy], ty1[iy], pallet)
        struck |= mm > lid + params.map_tol
    return struck


# What _quarter_candidates finds: ex, ey, reject counts, x0, y0, z, support.
_Quarter = tuple[float, float, dict[str, int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _quarter_candidates(
    stack: Sequence[StackBox],
    spec: PackageSpec,
    params: BeamParams,
    pallet: PalletGeometry,
    heightmap: HeightMap | None,
    tool: GripperGeometry | None,
    yaw_deg: float,
    boxes: tuple[np.ndarray, ...],
) -> _Quarter | None:
    """The candidates of `spec` at a quarter turn that pass the geometric rules: (ex, ey, reject
    counts, corner x0, y0, base z, support ratio), candidates in window order (x0 fastest);
    None when an axis has no start.

    A candidate's overlap and gap with a box along one axis depend on that axis's start only:
    they are taken per start and box, and per candidate only where z enters (the same
    doubles as per candidate and box)."""
    L, W, H = spec.dims_m
    hx, hy = pallet.size_xy[0] / 2.0, pallet.size_xy[1] / 2.0
    c = params.clearance
    bx0, bx1, by0, by1, bz0, btop = boxes
    n = len(bx0)
    ex, ey = (W, L) if round(yaw_deg / 90.0) % 2 else (L, W)
    xs = _axis_starts(ex, hx, bx0, bx1, c)
    ys = _axis_starts(ey, hy, by0, by1, c)
    if len(xs) == 0 or len(ys) == 0:
        return None
    xe, ye = xs + ex, ys + ey
    k = len(xs) * len(ys)
    counts: dict[str, int] = {}
    if n:
        ax = np.clip(np.minimum(xe[:, None], bx1) - np.maximum(xs[:, None], bx0), 0, None)
        ay = np.clip(np.minimum(ye[:, None], by1) - np.maximum(ys[:, None], by0), 0, None)
        area = (ax[None, :, :] * ay[:, None, :]).reshape(k, n)
        z = np.where(area > 1e-6, btop, 0.0).max(axis=1)
    else:
        z = np.zeros(k)
        area = np.zeros((k, 0))
    # The candidates left, by index (y start major, x start minor, as meshgrid ravels them).
    keep = np.arange(k)
    ix, iy = keep % len(xs), keep // len(xs)

    def drop(key: str, bad: np.ndarray) -> None:
        nonlocal keep, ix, iy, z
        counts[key] = int(np.count_nonzero(bad))
        if counts[key]:
            good = ~bad
            keep, ix, iy, z = keep[good], ix[good], iy[good], z[good]

    drop('max_height', z + H > params.max_height_m + 1e-9)
    if heightmap is not None:
        mm = map_max_under(heightmap, xs[ix], xe[ix], ys[iy], ye[iy], pallet)
        drop('map_conflict', mm > z + params.map_tol)
    if n:
        near_x = np.maximum(bx0 - xe[:, None], xs[:, None] - bx1) < c - 1e-9
        near_y = np.maximum(by0 - ye[:, None], ys[:, None] - by1) < c - 1e-9
        vert = (bz0 < (z + H)[:, None] - params.level_tol) & (btop > z[:, None] + params.level_tol)
        drop('clearance', (vert & near_x[ix] & near_y[iy]).any(axis=1))
    if tool is not None:
        struck = _under_tool(
            boxes, heightmap, pallet, params, tool, L, W, yaw_deg, (xs, ys), (ix, iy), z + H
        )
        drop('tool', struck)
    if n:
        on_top = np.abs(btop - z[:, None]) <= params.level_tol
        support = np.where(
            z <= params.level_tol, 1.0, (area[keep] * on_top).sum(axis=1) / (ex * ey)
        )
    else:
        support = np.ones(len(z))
    weak = support < params.min_support_ratio - 1e-9
    counts['min_support'] = int(np.count_nonzero(weak))
    good = ~weak
    return ex, ey, counts, xs[ix[good]], ys[iy[good]], z[good], support[good]


def expand(
    stack: Sequence[StackBox],
    spec: PackageSpec,
    params: BeamParams,
    pallet: PalletGeometry,
    heightmap: HeightMap | None = None,
    rejects: dict[str, int] | None = None,
    tool: GripperGeometry | None = None,
) -> list[Move]:
    """Up to candidates_per_node valid moves of `spec` on `stack`, best first.

    Candidates (docs/planners.md §6.7): yaws 0/90 (plus 180/270 for an off-centre CoG); low edges
    from the rims and every placed box, on each axis; each rests on the highest box
    under it. Rejected: above the height cap, a height-map cell higher than the base by more than
    map_tol (something unrecorded is there), a same-layer neighbour closer than the clearance on
    both axes, interface support below the minimum, and any whole-stack validation failure;
    with `tool`, a box (level_tol) or map cell (map_tol) under the tool body's reach beyond the
    carton standing above the new lid (core.planning.tool).
    """
    L, W, H = spec.dims_m
    rej = rejects if rejects is not None else {}
    bx0 = np.array([b.rect[0] for b in stack])
    bx1 = np.array([b.rect[1] for b in stack])
    by0 = np.array([b.rect[2] for b in stack])
    by1 = np.array([b.rect[3] for b in stack])
    bz0 = np.array([b.z for b in stack])
    btop = np.array([b.top for b in stack])
    off = spec.cog_offset_m
    yaws = [0.0, 90.0]
    if math.hypot(off[0], off[1]) > 1e-9 or spec.label_face:
        yaws += [180.0, 270.0]  # the half turn moves the weight, or turns the label round
    # The valid candidates of every yaw, as columns: quick score, base z, centre x and y, CoG
    # x and y, footprint ex and ey, yaw [rad]; a StackBox is made only for those examined.
    cols: list[np.ndarray] = []
    base_mass = sum(b.mass_kg for b in stack)
    base_moment = np.array([sum(b.mass_kg * b.cog[k] for b in stack) for k in range(2)])
    volume = sum(b.ex * b.ey * b.h for b in stack) + L * W * H
    stack_top = max((b.top for b in stack), default=0.0)
    # Yaw 180 (270) places the footprint of yaw 0 (90): the geometry of each quarter turn is
    # taken once, only the CoG terms per yaw. Each rule is tested on the candidates that
    # passed the ones before it (the counts are those of the whole-array masks).
    geometry: dict[int, _Quarter | None] = {}
    for yaw_deg in yaws:
        quarter = round(yaw_deg / 90.0) % 2
        if quarter not in geometry:
            boxes = (bx0, bx1, by0, by1, bz0, btop)
            geometry[quarter] = _quarter_candidates(
                stack, spec, params, pallet, heightmap, tool, yaw_deg, boxes
            )
        got = geometry[quarter]
        if got is None:
            continue
        ex, ey, counts, x0, y0, z, support = got
        for key, v in counts.items():
            rej[key] = rej.get(key, 0) + v
        yaw = math.radians(yaw_deg)
        cs, sn = math.cos(yaw), math.sin(yaw)
        cgx = x0 + ex / 2 + cs * off[0] - sn * off[1]
        cgy = y0 + ey / 2 + sn * off[0] + cs * off[1]
        mass = base_mass + spec.mass_kg
        gx_all = (base_moment[0] + spec.mass_kg * cgx) / mass if mass > 0 else cgx
        gy_all = (base_moment[1] + spec.mass_kg * cgy) / mass if mass > 0 else cgy
        centred = np.clip(1 - np.hypot(gx_all, gy_all) / pallet.half_diagonal, 0, 1)
        top = np.maximum(stack_top, z + H)
        low = np.clip(1 - top / params.max_height_m, 0, 1)
        compact = np.clip(volume / (pallet.size_xy[0] * pallet.size_xy[1] * top), 0, 1)
        w = params.weights
        quick = (
            w['support'] * np.clip(support, 0, 1)
            + w['centered_com'] * centred
            + w['low_height'] * low
            + w['compactness'] * compact
        )
        cols.append(
            np.stack(
                [
                    quick,
                    z,
                    x0 + ex / 2,
                    y0 + ey / 2,
                    cgx,
                    cgy,
                    np.full(len(z), ex),
                    np.full(len(z), ey),
                    np.full(len(z), yaw),
                ]
            )
        )
    pre = np.concatenate(cols, axis=1) if cols else np.zeros((9, 0))
    # Best quick score first; ties by base z, centre y, centre x, yaw; then in yaw and window
    # order (lexsort is stable; its last key is the primary one).
    order = np.lexsort((pre[8], pre[2], pre[3], pre[1], -pre[0]))
    w = params.weights
    limits = {
        'min_support': params.min_support_ratio,
        'min_margin': params.min_tipping_margin,
        'max_mass_kg': pallet.max_mass_kg,
        'max_height_m': params.max_height_m,
    }
    # Boxes already breaking a rule as measured cannot be fixed by this move: enforce the rules
    # on the others and on the new box only.
    hmax = params.max_height_m
    model = StackModel(stack, pallet.size_xy, **limits)
    # The valid boxes in quick-score order, each with its support ratio and tipping margin;
    # Python floats, as the per-candidate numbers are scalars.
    found: list[tuple[StackBox, float, float, float]] = []
    mx, my = float(base_moment[0]), float(base_moment[1])
    # Rows as Python floats a chunk at a time: most loads have far more candidates than moves.
    chunks = (pre[:, order[i : i + 64]].T.tolist() for i in range(0, len(order), 64))
    for _, bz, bx, by, cx, cy, ex, ey, yaw in itertools.chain.from_iterable(chunks):
        if len(found) >= params.candidates_per_node:
            break
        box = StackBox(bx, by, bz, ex, ey, H, spec.mass_kg, (cx, cy, bz + H / 2 + off[2]))
        reason, sup, mar = model.verdict(box)
        if reason:
            rej['unstable'] = rej.get('unstable', 0) + 1
            continue
        found.append((box, yaw, sup, mar))
    # The surface regularity of every valid box at once: the same per-box doubles as one std
    # per box (a row of the sample grid each; tested).
    gx, gy, surface = _surface_grid(stack, params.surface_samples, pallet.size_xy)
    gx, gy, surface = gx.ravel(), gy.ravel(), surface.ravel()
    if found:
        r = np.array([b.rect for b, *_ in found])
        tops = np.array([b.top for b, *_ in found])
        inside = (gx >= r[:, 0:1]) & (gx <= r[:, 1:2]) & (gy >= r[:, 2:3]) & (gy <= r[:, 3:4])
        rough = np.where(inside, np.maximum(surface, tops[:, None]), surface).std(axis=1)
    moves: list[Move] = []
    for (box, yaw, sup, mar), sd in zip(found, rough.tolist() if found else (), strict=True):
        comps = {
            'support': _unit(sup),
            'tipping_margin': _unit(mar / (min(box.ex, box.ey) / 2)),
            'regular_surface': _unit(1 - sd / hmax),
        }
        mass = base_mass + box.mass_kg
        g = (
            ((mx + box.mass_kg * box.cog[0]) / mass, (my + box.mass_kg * box.cog[1]) / mass)
            if mass > 0
            else box.cog[:2]
        )
        comps['centered_com'] = _unit(1 - math.hypot(*g) / pallet.half_diagonal)
        top_all = max(stack_top, box.top)
        comps['low_height'] = _unit(1 - top_all / params.max_height_m)
        comps['compactness'] = _unit(volume / (pallet.size_xy[0] * pallet.size_xy[1] * top_all))
        score = sum(w[t] * comps[t] for t in BEAM_TERMS)
        moves.append(Move(box, yaw, score, {t: comps[t] for t in BEAM_TERMS}, len(moves)))
    moves.sort(key=lambda m: (-m.score, m.box.z, m.box.y, m.box.x, m.yaw))
    return [Move(m.box, m.yaw, m.score, m.components, r) for r, m in enumerate(moves)]


class BeamPlanner:
    """Beam search (docs/planners.md §6.7) over the measured stack.

    The stack model is the recorded measured placements (yaw snapped to 0/90) checked against
    the height map. With a forecast, it searches min(lookahead, 1 + len(forecast)) cartons deep
    and returns the first move of the best sequence; without one it is greedy with whole-stack
    quasi-static validation. With reserve_tries > 0 it starts only from first moves that leave
    room for the reserve box while the stack has some (see BeamParams). It reads no simulator
    truth, so it is not an oracle; the forecast it gets may come from an oracle gauge, which
    the caller flags.
    """

    kind = PlannerKind.beam
    oracle = False

    def __init__(
        self,
        params: BeamParams | None = None,
        *,
        pallet: PalletGeometry | None = None,
        reach: ReachOracle | None = None,
        tcp_above_lid: float = 0.0035,
        tool: GripperGeometry | None = None,
        rules: SpecRules | None = None,
    ):
        self.params = params or BeamParams()
        self.tool = tool
        # A pallet spec's hard rules (core.planning.spec_rules): a first move that breaks one
        # is refused (counted as pallet_spec). The lookahead applies neither them nor the soft
        # rules to the forecast cartons.
        self.rules = rules if rules is not None and rules.active else None
        # Its soft rules lower each first move's score (SpecRules.penalty), as the heuristic's.
        self.soft = rules if rules is not None and rules.scores else None
        self.pallet = pallet or PalletGeometry()
        # With a reach oracle, first moves whose release pose the arm cannot take (the tool
        # down at the lid, either way round: the grasp may hold the carton turned by pi) are
        # rejected as out_of_reach, as the heuristic does; tcp_above_lid [m] = cup gap + drop.
        self.reach = reach
        self.tcp_above_lid = tcp_above_lid
        self.book = LayerBook(self.pallet)
        self.forecast: tuple[PackageSpec, ...] = ()

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None:
        """The cartons expected after the one in hand, in order."""
        self.forecast = tuple(specs)

    def record(self, placement: Placement) -> None:
        self.book.record(placement)

    def stack(self) -> list[StackBox]:
        return stack_from_placements(self.book.placements, self.book.specs)

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
        last_resort: bool = False,
    ) -> PlanResult:
        """The first move of the best sequence found for `spec` (and the forecast), or none
        with the reject counts. last_resort (Planner): when none is found, each of
        params.last_resort_support is tried in turn as the least support ratio, for the search
        as a whole; the plan's predicted_support says how much it found."""
        found = self._search(spec, heightmap, pallet, excluded_slots)
        if found.plan is not None or not last_resort:
            return found
        usual = self.params
        try:
            for ratio in usual.last_resort_support:
                self.params = replace(usual, min_support_ratio=ratio, last_resort_support=())
                got = self._search(spec, heightmap, pallet, excluded_slots)
                if got.plan is not None:
                    return PlanResult(got.plan, found.reject_summary)
        finally:
            self.params = usual
        return found

    def _search(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str],
    ) -> PlanResult:
        self.book.remember(spec)
        p = self.params
        base = self.stack()
        rejects: dict[str, int] = {}
        roots = self._roots(base, spec, heightmap, p.candidates_per_node, rejects)
        summary = {k: v for k, v in rejects.items() if v > 0}
        named = [(m, self._slot(m)) for m in roots]
        near = self._near_excluded(excluded_slots)
        roots = [m for m, slot in named if slot not in excluded_slots and not near(m)]
        if len(roots) < len(named):
            summary['excluded'] = len(named) - len(roots)
        if not roots:
            return PlanResult(None, summary)
        roots = self._keeping_room(base, spec, roots, heightmap, excluded_slots)
        seq = [spec, *self.forecast][: max(1, p.lookahead)]
        beam = [(m.score, [*base, m.box], m) for m in roots[: p.beam_width]]
        for nxt in seq[1:]:
            children = []
            for score, boxes, first in beam:
                for m in expand(boxes, nxt, p, self.pallet, None, tool=self.tool):
                    children.append((score + m.score, [*boxes, m.box], first))
            if not children:
                break
            children.sort(key=lambda t: -t[0])
            beam = children[: p.beam_width]
        best = max(beam, key=lambda t: t[0])[2]
        b = best.box
        wx, wy = b.x + self.pallet.centre_xy[0], b.y + self.pallet.centre_xy[1]
        plan = PlacementPlan(
            position=(wx, wy, self.pallet.deck_z + b.z + b.h / 2.0),
            yaw=best.yaw,
            layer=self.book.layer(b.z),
            slot=self._slot(best),
            score=best.score,
            predicted_support=best.components['support'],
            breakdown=best.components,
        )
        return PlanResult(plan, summary)

    def _roots(
        self,
        base: list[StackBox],
        spec: PackageSpec,
        heightmap: HeightMap,
        n: int,
        rejects: dict[str, int] | None = None,
    ) -> list[Move]:
        """Up to n valid first moves of `spec` on `base`, best first, those the arm cannot
        reach removed (counted as out_of_reach)."""
        rej = rejects if rejects is not None else {}
        # With a spec's rules, more candidates are asked for: some will break a rule.
        ask = n if self.rules is None else 4 * n
        moves = expand(
            base,
            spec,
            replace(self.params, candidates_per_node=ask),
            self.pallet,
            heightmap,
            rej,
            tool=self.tool,
        )
        if self.rules is not None and moves:
            rules = self.rules
            kept = [
                m
                for m in moves
                if not rules.breaks(
                    self.book.placements,
                    rules.item(spec, (m.box.x, m.box.y, m.box.z + m.box.h / 2.0, m.yaw)),
                )
            ]
            if len(kept) < len(moves):
                rej[PALLET_SPEC] = rej.get(PALLET_SPEC, 0) + len(moves) - len(kept)
            moves = kept[:n]
        if self.soft is not None and moves:
            pen = self.soft.penalty(
                self.book.placements,
                spec,
                np.array([m.box.x for m in moves]),
                np.array([m.box.y for m in moves]),
                np.array([m.yaw for m in moves]),
                np.array([m.box.z for m in moves]),
            )
            scored = [
                replace(m, score=m.score - float(q)) for m, q in zip(moves, pen, strict=True)
            ]
            moves = sorted(scored, key=lambda m: -m.score)
        if self.reach is None or not moves:
            return moves
        ok = self._reachable(moves)
        rej['out_of_reach'] = rej.get('out_of_reach', 0) + int(np.count_nonzero(~ok))
        return [m for m, r in zip(moves, ok, strict=True) if r]

    def _keeping_room(
        self,
        base: list[StackBox],
        spec: PackageSpec,
        roots: list[Move],
        heightmap: HeightMap,
        excluded_slots: Collection[str],
    ) -> list[Move]:
        """The first moves to search from. While `base` has room for the reserve box: those
        that still leave it room, up to beam_width of them, looked for among the roots and, if
        none of those does, among the best reserve_tries valid first moves; else (or if none
        leaves room) the roots."""
        p = self.params
        if p.reserve_tries <= 0 or not self._room(base, heightmap):
            return roots

        def keepers(moves: list[Move]) -> list[Move]:
            out: list[Move] = []
            for m in moves[: p.reserve_tries]:
                if self._room([*base, m.box], heightmap):
                    out.append(m)
                    if len(out) >= p.beam_width:
                        break
            return out

        keep = keepers(roots)
        if not keep and p.reserve_tries > p.candidates_per_node:
            wide = self._roots(base, spec, heightmap, p.reserve_tries)
            near = self._near_excluded(excluded_slots)
            keep = keepers(
                [m for m in wide if self._slot(m) not in excluded_slots and not near(m)]
            )
        return keep or roots

    def _room(self, stack: list[StackBox], heightmap: HeightMap) -> bool:
        """Whether `stack` has a valid move for the reserve box that the arm can reach."""
        spec = PackageSpec('reserve', 'reserve', self.params.reserve, 1.0)
        return bool(self._roots(stack, spec, heightmap, 8))

    def _reachable(self, moves: Sequence[Move]) -> np.ndarray:
        """(len(moves),) bool: the release pose reachable with the tool at yaw and yaw + pi,
        where the TCP stands for each (tool.tcp_shifts: off the centre over a small lid)."""
        assert self.reach is not None
        cx, cy = self.pallet.centre_xy
        x = np.array([m.box.x + cx for m in moves])
        y = np.array([m.box.y + cy for m in moves])
        z = np.array([self.pallet.deck_z + m.box.z + m.box.h + self.tcp_above_lid for m in moves])
        yaw = np.array([m.yaw for m in moves])
        sx, sy = np.zeros((2, len(moves))), np.zeros((2, len(moves)))
        for i, m in enumerate(moves):
            turned = round(m.yaw / (math.pi / 2)) % 2 == 1
            L, W = (m.box.ey, m.box.ex) if turned else (m.box.ex, m.box.ey)
            shifts = tcp_shifts(L, W, yaw[i : i + 1], self.tool)
            for k, (dx, dy) in enumerate(shifts * (2 // len(shifts))):
                sx[k, i], sy[k, i] = dx[0], dy[0]
        ok = np.ones(len(moves), dtype=bool)
        for k in range(2):
            for turn in (0.0, math.pi):
                got = self.reach.reachable(x + sx[k], y + sy[k], z, yaw + turn)
                ok &= np.asarray(got, dtype=bool)
        return ok

    def _near_excluded(self, excluded_slots: Collection[str]) -> Callable[[Move], bool]:
        """Move -> whether its centre lies within params.exclude_radius (along x and y) of an
        excluded slot of its layer, at any turn (slot names beam-L<layer>-<x>x<y>r<deg>, mm
        from the pallet centre); never when the radius is 0 or nothing is excluded. A slot the
        executor refused is seldom saved by one a centimetre off: level 23 seed 18 was
        refused at 475 x 288, 475 x 304 and 475 x 288 turned, the cross over the stack out of
        the arm's reach each time."""
        r = self.params.exclude_radius
        spots: dict[int, list[tuple[float, float]]] = {}
        for name in excluded_slots if r > 0.0 else ():
            m = _SLOT.fullmatch(name)
            if m:
                spots.setdefault(int(m[1]), []).append((int(m[2]) / 1000, int(m[3]) / 1000))
        if not spots:
            return lambda m: False

        def near(m: Move) -> bool:
            at = spots.get(self.book.layer(m.box.z), ())
            return any(
                abs(m.box.x - x) <= r + 1e-9 and abs(m.box.y - y) <= r + 1e-9 for x, y in at
            )

        return near

    def _slot(self, m: Move) -> str:
        x, y = round(m.box.x * 1000), round(m.box.y * 1000)
        return f'beam-L{self.book.layer(m.box.z)}-{x}x{y}r{round(math.degrees(m.yaw))}'
