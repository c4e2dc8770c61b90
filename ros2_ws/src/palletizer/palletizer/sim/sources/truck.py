"""Truck source: the whole load stands in the trailer in columns; the highest carton comes first.

Why one file of this length: the trailer's layout (columns, ties), its MJCF and the unloading
order are small and share the column model; the conveyor, whose parts grew larger, is split.
"""

from __future__ import annotations

import collections
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from palletizer.core.config.cell import CellConfig
from palletizer.sim.cartons import CartonHandle, CartonLike, carton_body_xml, yaw_quat
from palletizer.sim.sources.base import Presented, RestWatch, SourceError, SourceState, StepWorld

__all__ = [
    'TruckParams',
    'TruckPlan',
    'TruckSlot',
    'TruckSource',
    'plan_truck_load',
    'truck_params',
]

_SOLID = 'contype="3" conaffinity="3" group="0"'
_VISUAL = 'contype="0" conaffinity="0" group="2"'


@dataclass(frozen=True)
class TruckParams:
    """Trailer bay and load-planning limits (docs/cell.md §3.5-3.6). Lengths [m].

    The bay is x [origin_x, origin_x + size_x], y [origin_y, origin_y + size_y]; its robot side
    (+X) and pallet side (+Y) are open (curtain-sider), the far wall and the bulkhead are solid.
    """

    origin: tuple[float, float] = (-0.62, -1.28)
    size: tuple[float, float] = (0.74, 0.88)
    floor: float = 0.02
    column_gap: float = 0.04
    max_stack_height: float = 0.86  # above the floor
    max_column_items: int = 5
    min_support: float = 0.62  # fraction of a carton's footprint on the one below
    max_slide: float = 0.09  # off the column axis, in slide_step steps
    slide_step: float = 0.03
    loader_pos: float = 0.005  # loader disorder +- [m]
    loader_yaw: float = math.radians(1.5)  # loader disorder +- [rad]
    edge_margin: float = 0.02  # keep the load this far inside the bay (pallet corner at y -0.40)
    deck_friction: tuple[float, float, float] = (0.9, 0.01, 0.001)
    wall_friction: tuple[float, float, float] = (0.7, 0.01, 0.001)
    wall_height: float = 1.30
    max_redraws: int = 24
    drop: float = 0.0005  # cartons are staged this far above their support, then settle
    rest_speed: float = 0.015  # [m/s] every pending lid slower than this ...
    rest_time: float = 0.10  # [s] ... for this long before the highest is measured
    timeout_s: float = 25.0
    # Tops within tie_band of the highest are a tie, broken by what a camera sees: the lid
    # centre nearest tie_point (the robot base), then the smaller x, then the index.
    tie_band: float = 0.030
    tie_point: tuple[float, float] = (0.60, -0.72)
    # A load is drawn again when, at some step of its unloading, a pending top lies within
    # tie_clear of the tie band's edge (highest top - tie_band): a camera cannot tell which
    # side of the edge it is on, so it could not say which carton comes next (0: off). When
    # no draw is clear, the one with the widest clearance is taken.
    tie_clear: float = 0.0


def truck_params(cell: CellConfig | None = None) -> TruckParams:
    """TruckParams from the `truck` block of cell.yaml (Config.cell) when given."""
    if cell is None:
        return TruckParams()
    t = cell.truck
    return TruckParams(
        origin=t.origin,
        size=t.size,
        floor=t.floor,
        column_gap=t.column_gap,
        max_stack_height=t.max_stack_height,
        max_column_items=t.max_column_items,
        min_support=t.min_support,
        max_slide=t.max_slide,
        loader_pos=t.loader_jitter.pos,
        loader_yaw=math.radians(t.loader_jitter.yaw_deg),
        deck_friction=t.friction,
        tie_band=t.tie_band,
        tie_point=t.tie_point,
        tie_clear=t.tie_clear,
    )


@dataclass(frozen=True)
class TruckSlot:
    """Where one carton stands in the trailer: centre [m] and yaw [rad]."""

    index: int
    column: int
    tier: int
    centre: tuple[float, float, float]
    yaw: float


@dataclass(frozen=True)
class TruckPlan:
    """A load plan: one slot per carton, the number of columns and the re-draw that worked."""

    slots: tuple[TruckSlot, ...]
    columns: int
    attempt: int


@dataclass(frozen=True)
class _Rect:
    x0: float
    y0: float
    x1: float
    y1: float

    def grow(self, d: float) -> _Rect:
        return _Rect(self.x0 - d, self.y0 - d, self.x1 + d, self.y1 + d)

    def overlap(self, o: _Rect) -> float:
        w = min(self.x1, o.x1) - max(self.x0, o.x0)
        h = min(self.y1, o.y1) - max(self.y0, o.y0)
        return max(w, 0.0) * max(h, 0.0)

    @property
    def area(self) -> float:
        return (self.x1 - self.x0) * (self.y1 - self.y0)


def _rect(cx: float, cy: float, ex: float, ey: float) -> _Rect:
    return _Rect(cx - ex / 2, cy - ey / 2, cx + ex / 2, cy + ey / 2)


def _extent(
    dims: Sequence[float], turned: bool, p: TruckParams, jitter: bool
) -> tuple[float, float]:
    """Reserved footprint (x, y) [m]: the rotated box widened by the loader disorder."""
    lx, ly = (dims[1], dims[0]) if turned else (dims[0], dims[1])
    if not jitter:
        return lx, ly
    c, s = math.cos(p.loader_yaw), math.sin(p.loader_yaw)
    return lx * c + ly * s + 2 * p.loader_pos, ly * c + lx * s + 2 * p.loader_pos


def _free_spot(
    extent: tuple[float, float], bay: _Rect, clear: Any, step: float = 0.01
) -> _Rect | None:
    """First free floor spot scanning rows front to back (from the bulkhead), left to right."""
    ex, ey = extent
    ny = int((bay.y1 - bay.y0 - ey) / step + 1e-9)
    nx = int((bay.x1 - bay.x0 - ex) / step + 1e-9)
    for iy in range(ny + 1):
        for ix in range(nx + 1):
            r = _Rect(
                bay.x0 + ix * step,
                bay.y0 + iy * step,
                bay.x0 + ix * step + ex,
                bay.y0 + iy * step + ey,
            )
            if clear(r, None):
                return r
    return None


def _try_plan(
    dims: Sequence[tuple[float, float, float]],
    rng: random.Random,
    p: TruckParams,
    jitter: bool,
    attempt: int,
    target_cols: int | None = None,
    defer: bool = False,
) -> list[tuple[int, int, int, float, float, float, bool]] | None:
    """One draw of the plan: (index, column, tier, x, y, z_bottom, turned) per carton, or None.
    target_cols: columns opened on the floor (default ceil(n / 2)). defer: a carton that finds
    no place is tried once more after the others (without it the draw fails there)."""
    n = len(dims)
    order = list(range(n))
    rng.shuffle(order)
    order.sort(key=lambda i: -dims[i][0] * dims[i][1])  # biggest footprint first, stable
    queue = collections.deque(order)
    deferred: set[int] = set()
    if target_cols is None:
        target_cols = math.ceil(n / 2)
    bay = _Rect(p.origin[0], p.origin[1], p.origin[0] + p.size[0], p.origin[1] + p.size[1]).grow(
        -p.edge_margin
    )
    ceiling = p.floor + p.max_stack_height
    columns: list[list[tuple[int, _Rect, float, bool]]] = []  # (index, reserved rect, top, turned)
    placed: list[tuple[int, int, int, float, float, float, bool]] = []

    def clear_of_others(r: _Rect, skip: int | None) -> bool:
        for c, col in enumerate(columns):
            if c == skip:
                continue
            if any(r.overlap(m[1].grow(p.column_gap)) > 0.0 for m in col):
                return False
        return True

    while queue:
        i = queue.popleft()
        d = dims[i]
        done = False
        if len(columns) < target_cols:
            first = rng.random() < 0.5
            for turned in (first, not first):
                spot = _free_spot(_extent(d, turned, p, jitter), bay, clear_of_others)
                if spot is not None and d[2] <= ceiling - p.floor:
                    columns.append([(i, spot, p.floor + d[2], turned)])
                    cx, cy = (spot.x0 + spot.x1) / 2, (spot.y0 + spot.y1) / 2
                    placed.append((i, len(columns) - 1, 0, cx, cy, p.floor, turned))
                    done = True
                    break
        if done:
            continue
        feasible = [c for c, col in enumerate(columns) if len(col) < p.max_column_items]
        feasible = [c for c in feasible if columns[c][-1][2] + d[2] <= ceiling]
        if not feasible:
            if defer and queue and i not in deferred:
                deferred.add(i)
                queue.append(i)
                continue
            return None
        if attempt == 0:
            lowest = min(columns[c][-1][2] for c in feasible)
            feasible = [c for c in feasible if columns[c][-1][2] <= lowest + 0.06]
        rng.shuffle(feasible)
        for c in feasible:
            top_i, top_r, top_z, top_turned = columns[c][-1]
            cx, cy = (top_r.x0 + top_r.x1) / 2, (top_r.y0 + top_r.y1) / 2
            k = round(p.max_slide / p.slide_step)
            slides = sorted(
                (
                    (a * p.slide_step, b * p.slide_step)
                    for a in range(-k, k + 1)
                    for b in range(-k, k + 1)
                ),
                key=lambda s: (math.hypot(*s), s),
            )
            for turned in (top_turned, not top_turned):
                ex, ey = _extent(d, turned, p, jitter)
                fx, fy = _extent(d, turned, p, False)
                for sx, sy in slides:
                    r = _rect(cx + sx, cy + sy, ex, ey)
                    if r.x0 < bay.x0 or r.y0 < bay.y0 or r.x1 > bay.x1 or r.y1 > bay.y1:
                        continue
                    foot = _rect(cx + sx, cy + sy, fx, fy)
                    support = (
                        foot.overlap(top_r.grow(-p.loader_pos if jitter else 0.0)) / foot.area
                    )
                    if support < p.min_support or not clear_of_others(r, c):
                        continue
                    columns[c].append((i, r, top_z + d[2], turned))
                    placed.append((i, c, len(columns[c]) - 1, cx + sx, cy + sy, top_z, turned))
                    done = True
                    break
                if done:
                    break
            if done:
                break
        if not done:
            if defer and queue and i not in deferred:
                deferred.add(i)
                queue.append(i)
                continue
            return None
    return placed


def _edge_clearance(
    placed: Sequence[tuple[int, int, int, float, float, float, bool]],
    dims: Sequence[tuple[float, float, float]],
    p: TruckParams,
) -> float:
    """How clearly a camera reads the load's unloading order [m]: over the steps of its
    unloading (the source's order, TruckSource._ranked, run on the planned tops), the smallest
    of the distance from the tie band's edge (highest top minus tie_band) of a pending top
    whose side of the edge decides which carton comes next, and of the difference between the
    distances to tie_point of the two nearest lids in the band. A top decides when it would
    win the tie in it and not be in it otherwise: nearer tie_point than every other top in the
    band. Two band lids almost equally near tie_point leave the choice to a millimetre the
    camera cannot see (level 33 seed 6: 1.8 mm, the detector calls under 5 mm a draw)."""
    top = {i: z0 + dims[i][2] for i, _c, _t, _x, _y, z0, _tu in placed}
    xy = {i: (x, y) for i, _c, _t, x, y, _z, _tu in placed}
    tx, ty = p.tie_point

    def key(i: int) -> tuple[float, float, int]:
        return (math.hypot(xy[i][0] - tx, xy[i][1] - ty), xy[i][0], i)

    rest = set(top)
    clear = math.inf
    while rest:
        highest = max(rest, key=lambda i: top[i])
        edge = top[highest] - p.tie_band
        tied = [i for i in rest if top[i] >= edge]
        near = sorted(key(i)[0] for i in tied)
        if len(near) > 1:
            clear = min(clear, near[1] - near[0])
        for i in rest:
            if i == highest:
                continue
            others = [j for j in tied if j != i]
            if key(i) < min(key(j) for j in others):
                clear = min(clear, abs(top[i] - edge))
        rest.remove(min(tied, key=key))
    return clear


def _slots(
    placed: Sequence[tuple[int, int, int, float, float, float, bool]],
    dims: Sequence[tuple[float, float, float]],
    rng: random.Random,
    p: TruckParams,
    loader_jitter: bool,
) -> list[TruckSlot]:
    """The planned cartons as staged: each off by the loader's disorder when `loader_jitter`
    (drawn from `rng` in index order), dropped `drop` per tier above its support."""
    slots = []
    for i, col, tier, x, y, z0, turned in sorted(placed):
        yaw = math.pi / 2 if turned else 0.0
        if loader_jitter:
            x += rng.uniform(-p.loader_pos, p.loader_pos)
            y += rng.uniform(-p.loader_pos, p.loader_pos)
            yaw += rng.uniform(-p.loader_yaw, p.loader_yaw)
        z = z0 + dims[i][2] / 2 + p.drop * (tier + 1)
        slots.append(TruckSlot(index=i, column=col, tier=tier, centre=(x, y, z), yaw=yaw))
    return slots


def _as_placed(
    placed: Sequence[tuple[int, int, int, float, float, float, bool]],
    slots: Sequence[TruckSlot],
) -> list[tuple[int, int, int, float, float, float, bool]]:
    """`placed` (by index) with each carton's x, y where its staged slot stands."""
    return [
        (i, c, t, s.centre[0], s.centre[1], z0, turned)
        for (i, c, t, _x, _y, z0, turned), s in zip(sorted(placed), slots, strict=True)
    ]


def _copy(rng: random.Random) -> random.Random:
    """A generator that draws what `rng` would draw next, leaving `rng` as it is."""
    twin = random.Random()
    twin.setstate(rng.getstate())
    return twin


def plan_truck_load(
    dims: Sequence[tuple[float, float, float]],
    seed: int,
    loader_jitter: bool,
    params: TruckParams | None = None,
) -> TruckPlan:
    """Stand a load of cartons (full dims L, W, H [m], by index) in the trailer in columns.

    Biggest footprint first after a seeded shuffle; aim for ceil(n/2) columns opened on free
    floor (rows left to right along X, front to back from the bulkhead); otherwise stack on a
    column within 6 cm of the lowest, keeping its yaw then crossing it, sliding up to max_slide,
    with at least min_support under the carton and under the ceiling; re-draw up to
    max_redraws times (docs/cell.md §3.6), then as many times again for each other column count
    within 2. A load whose unloading order a camera could not read (a top within tie_clear of
    the tie band's edge at some step, or two band lids within tie_clear of equally near
    tie_point, see _edge_clearance) is drawn again too. Failing all of those, the draws are
    made again letting a carton that finds no place wait for the others; when no draw is
    readable, the standing draw with the widest clearance is taken. Python's
    Random(seed), then Random(seed * 1000003 + attempt) for re-draws (docs/levels.md §2.2).
    With `loader_jitter` each carton is off by up to
    +-loader_pos and +-loader_yaw, reserved for in every footprint.
    """
    p = params or TruckParams()
    if not dims:
        raise SourceError('truck: an empty load; expected at least one carton')
    # Attempts 0..max_redraws open ceil(n/2) floor columns; a load none of them stands is
    # re-drawn max_redraws more times for each other count nearby (L33 seeds 7 and 45 stand
    # only so), and what the default count stands is unchanged.
    base = math.ceil(len(dims) / 2)
    counts = [None] + [c for c in (base - 1, base + 1, base - 2, base + 2) if 1 <= c <= len(dims)]
    draws = [
        (k * (p.max_redraws + 1) + a, cols)
        for k, cols in enumerate(counts)
        for a in range(p.max_redraws + 1)
        if k == 0 or a > 0
    ]
    # The first draw that stands and whose unloading a camera can read; failing that, the
    # standing draw that comes nearest to it (some random loads have no readable draw). Loads
    # no draw stands readably in footprint order are drawn again letting a carton that finds
    # no place wait for the others (L33 seed 45: a small lid needs a column a later carton
    # opens); the loads that stood readably before are unchanged.
    best: tuple[float, int, Any] | None = None
    last = draws[-1][0]
    passes = [(False, draws), (True, [(last + 1 + a, cols) for a, cols in draws])]
    for defer, these in passes:
        if best is not None and best[0] >= p.tie_clear:
            break
        for attempt, cols in these:
            rng = random.Random(seed if attempt == 0 else seed * 1_000_003 + attempt)
            placed = _try_plan(dims, rng, p, loader_jitter, attempt, cols, defer)
            if placed is None:
                continue
            # The loader's disorder comes next from the same generator: the camera reads the
            # lids where they stand, so the clearance is measured on the disordered slots.
            slots = _slots(placed, dims, _copy(rng), p, loader_jitter)
            clear = (
                _edge_clearance(_as_placed(placed, slots), dims, p)
                if p.tie_clear > 0.0
                else math.inf
            )
            if best is None or clear > best[0] + 1e-6:  # clearer by more than rounding
                best = (clear, attempt, slots)
            if clear >= p.tie_clear:
                break
    if best is not None:
        _, attempt, slots = best
        return TruckPlan(
            slots=tuple(slots), columns=1 + max(s.column for s in slots), attempt=attempt
        )
    raise SourceError(
        f'truck: no plan for {len(dims)} cartons in a {p.size[0]} x {p.size[1]} m bay after '
        f'{2 * len(draws) - 1} re-draws ({p.max_redraws} for each of {len(counts)} floor-column '
        f'counts, then as many letting a carton wait for the others); allowed: at most {p.max_column_items} per column, '
        f'{p.max_stack_height} m high'
    )


class TruckSource:
    """The trailer: the whole load stands from the first frame; present() measures and offers
    the pending carton with the highest top (the only one carrying nothing); tops within
    tie_band of it are a tie, broken by the lid nearest tie_point (a rule a camera can apply).
    Load drift = max lid displacement of pending cartons since the staged load first came to
    rest.
    """

    kind = 'truck'

    def __init__(
        self,
        draws: Sequence[CartonLike],
        seed: int,
        loader_jitter: bool = False,
        params: TruckParams | None = None,
    ) -> None:
        """`draws` by index; `seed` drives the load plan (docs/levels.md §2.2)."""
        self.p = params or TruckParams()
        self._draws = {d.index: d for d in draws}
        if not self._draws:
            raise SourceError('truck: an empty load; expected at least one carton')
        order = sorted(self._draws)
        plan = plan_truck_load([self._draws[i].dims for i in order], seed, loader_jitter, self.p)
        # The plan works on positions in `order`; map back to carton indices.
        self.plan = TruckPlan(
            slots=tuple(
                TruckSlot(order[s.index], s.column, s.tier, s.centre, s.yaw) for s in plan.slots
            ),
            columns=plan.columns,
            attempt=plan.attempt,
        )
        self._slots = {s.index: s for s in self.plan.slots}
        self._handles: dict[int, CartonHandle] = {}
        self._model: mujoco.MjModel | None = None
        self._data: mujoco.MjData | None = None
        self._lid0: dict[int, np.ndarray] = {}
        self._taken: list[int] = []
        self._presented: Presented | None = None
        self._jammed = False
        self._settled = False
        self._load_rest = RestWatch(self.p.rest_speed, self.p.rest_time)

    def scenery_xml(self) -> str:
        """Trailer deck, far wall and bulkhead (solid), and a rail along the open sides (visual)."""
        p = self.p
        x0, y0 = p.origin
        sx, sy = p.size
        cx, cy = x0 + sx / 2, y0 + sy / 2
        t = 0.025
        h = p.wall_height / 2
        fr = ' '.join(f'{v:.6g}' for v in p.deck_friction)
        fw = ' '.join(f'{v:.6g}' for v in p.wall_friction)
        return (
            f'<geom name="truck_deck" type="box" pos="{cx:.6g} {cy:.6g} {p.floor / 2:.6g}" '
            f'size="{sx / 2 + 2 * t:.6g} {sy / 2 + 2 * t:.6g} {p.floor / 2:.6g}" {_SOLID} '
            f'friction="{fr}" rgba="0.35 0.30 0.25 1"/>'
            f'<geom name="truck_far_wall" type="box" pos="{x0 - t:.6g} {cy:.6g} {h:.6g}" '
            f'size="{t:.6g} {sy / 2 + 2 * t:.6g} {h:.6g}" {_SOLID} friction="{fw}" '
            f'rgba="0.70 0.72 0.75 1"/>'
            f'<geom name="truck_bulkhead" type="box" pos="{cx:.6g} {y0 - t:.6g} {h:.6g}" '
            f'size="{sx / 2:.6g} {t:.6g} {h:.6g}" {_SOLID} friction="{fw}" '
            f'rgba="0.70 0.72 0.75 1"/>'
            f'<geom name="truck_rail" type="box" pos="{cx:.6g} {y0 + sy + t:.6g} {p.floor + 0.01:.6g}" '
            f'size="{sx / 2:.6g} 0.01 0.01" {_VISUAL} rgba="0.95 0.80 0.10 1"/>'
        )

    def cartons_xml(self) -> str:
        """The whole load at its planned poses."""
        return ''.join(
            carton_body_xml(self._draws[i], self._slots[i].centre, yaw_quat(self._slots[i].yaw))
            for i in sorted(self._draws)
        )

    def bind(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Resolve carton ids and remember every lid where it was staged."""
        self._model, self._data = model, data
        self._handles = {i: CartonHandle.bind(model, i, d.dims) for i, d in self._draws.items()}
        mujoco.mj_kinematics(model, data)
        self._lid0 = {i: h.lid_position(data) for i, h in self._handles.items()}

    def before_step(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Nothing is driven in a parked trailer; the load's rest is watched (RestWatch)
        while no carton is presented: every pending lid slower than rest_speed."""
        pending = self._pending_ids()
        if self._presented is not None or not pending:
            self._load_rest.clear()
            return
        t = float(data.time)
        if self._load_rest.due(t):
            speed = max(self._handles[i].lid_speed(model, data) for i in pending)
            self._load_rest.update(t, speed)

    def _pending_ids(self) -> list[int]:
        return [i for i in sorted(self._draws) if i not in self._taken]

    def _ranked(self, data: mujoco.MjData) -> list[int]:
        """Pending cartons in the order they come out: of the tops within tie_band of the
        highest, the lid centre nearest tie_point first (then smaller x, then lower index)."""
        pending = self._pending_ids()
        tops = {i: self._handles[i].top(data) for i in pending}
        lids = {i: self._handles[i].lid_position(data) for i in pending}
        tx, ty = self.p.tie_point
        ranked: list[int] = []
        rest = list(pending)
        while rest:
            best = max(tops[i] for i in rest)
            tied = [i for i in rest if tops[i] >= best - self.p.tie_band]
            first = min(
                tied,
                key=lambda i: (math.hypot(lids[i][0] - tx, lids[i][1] - ty), lids[i][0], i),
            )
            ranked.append(first)
            rest.remove(first)
        return ranked

    def present(self, world: StepWorld) -> Presented | None:
        """Wait until the load rests (at once if it came to rest while the arm was away), then
        offer the highest pending carton."""
        if self._presented is not None:
            return self._presented
        pending = self._pending_ids()
        if self._jammed or not pending:
            return None
        tick = max(1, round(0.02 / float(world.model.opt.timestep)))
        t0 = world.time
        while True:
            if self._load_rest.resting:
                if not self._settled:
                    # Drift is counted from the load as it first came to rest: the staging
                    # drop (0.5 mm per tier) and contact penetration are not drift.
                    self._lid0 = {i: h.lid_position(world.data) for i, h in self._handles.items()}
                    self._settled = True
                best = self._ranked(world.data)[0]
                self._presented = Presented(self._draws[best].package_id, best)
                return self._presented
            if world.time - t0 >= self.p.timeout_s:
                break
            world.step(tick)
        self._jammed = True
        return None

    def release(self, package_id: str) -> None:
        """The arm took `package_id`: the presented carton, or another of the load (a real
        trailer's cartons are all there; a palletizer that ranks them itself may take another
        of a tie). The next `present` ranks the load again."""
        index = next((i for i, d in self._draws.items() if d.package_id == package_id), None)
        if index is None or index in self._taken:
            current = self._presented.package_id if self._presented else None
            raise SourceError(
                f'truck: release({package_id!r}), which is not a pending carton of the load '
                f'(presented: {current!r})'
            )
        self._taken.append(index)
        self._presented = None

    def load_drift_mm(self) -> float:
        """Max lid displacement of pending cartons since staging [mm]."""
        if self._data is None:
            return 0.0
        drift = [
            float(np.linalg.norm(self._handles[i].lid_position(self._data) - self._lid0[i]))
            for i in self._pending_ids()
            if self._presented is None or i != self._presented.index
        ]
        return 1000.0 * max(drift, default=0.0)

    def state(self) -> SourceState:
        """Pending, exhausted, jammed; extras: columns still holding cartons, load drift [mm]."""
        pending = self._pending_ids()
        columns = len({self._slots[i].column for i in pending})
        return SourceState(
            kind=self.kind,
            pending=len(pending),
            exhausted=not pending,
            jammed=self._jammed,
            extras={'columns': columns, 'load_drift_mm': round(self.load_drift_mm(), 3)},
        )

    def forecast(self) -> list[str]:
        """Remaining package ids by measured top height, highest first."""
        if self._data is None:
            return []
        return [self._draws[i].package_id for i in self._ranked(self._data)]
