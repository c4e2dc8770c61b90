"""How well a stack keeps a pallet spec's rules (core/pallet_spec.py), measured from the cartons'
poses: the referee's compliance checks (docs/pallet-spec.md "What the referee measures").

The stack is read as a support graph: a carton rests on another where its bottom lies within
SUPPORT_GAP_M of the other's top and their footprints overlap by at least MIN_CONTACT_M2. The
mass resting on each carton is propagated down that graph, each carton passing its own mass and
what rests on it to its supports in proportion to the contact areas (and to the deck where it
stands on it), as PCT's load-propagating stability rule does. Footprints are the cartons' L x W
turned by their yaw rounded to a quarter turn: the planners place at quarter turns, and a few
degrees of error move an overlap by a few per cent.

Every figure is measured whatever the spec; a rule is broken only when the spec has it on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from palletizer.core.pallet_spec import PalletSpec

__all__ = [
    'Compliance',
    'Deck',
    'StackItem',
    'check_compliance',
    'label_normal',
    'load_above',
    'load_shares',
    'measure_stack',
    'pallet_deck',
    'stack_items',
    'supports',
]

SUPPORT_GAP_M = 0.010  # [m] bottom-to-top gap still counted as resting (settled cartons: < 2 mm)
MIN_CONTACT_M2 = 1e-4  # [m^2] 1 cm^2: a smaller overlap is an edge brushing, not support
NEIGHBOUR_GAP_M = 0.060  # [m] side gap within which two cartons of a group are together
_DEFAULT_TOLERANCE_KG = 0.5
_DEFAULT_BAND_M = 0.05


@dataclass(frozen=True)
class StackItem:
    """One carton on the pallet: geometric centre [m, world], full L x W x H [m] in its package
    frame, yaw [rad] of its x axis from world x, mass [kg], and its type (catalogue name)."""

    package_id: str
    type_name: str
    centre: tuple[float, float, float]
    dims: tuple[float, float, float]
    yaw: float
    mass_kg: float

    @property
    def half_xy(self) -> tuple[float, float]:
        quarter = round(self.yaw / (math.pi / 2)) % 2
        a, b = self.dims[0] / 2, self.dims[1] / 2
        return (b, a) if quarter else (a, b)

    @property
    def bottom(self) -> float:
        return self.centre[2] - self.dims[2] / 2

    @property
    def top(self) -> float:
        return self.centre[2] + self.dims[2] / 2

    def bounds(self) -> tuple[float, float, float, float]:
        hx, hy = self.half_xy
        return (self.centre[0] - hx, self.centre[0] + hx, self.centre[1] - hy, self.centre[1] + hy)


@dataclass(frozen=True)
class Deck:
    """The pallet's deck: centre xy [m], size along x and y [m], top z [m]."""

    centre: tuple[float, float]
    size: tuple[float, float]
    top: float

    def bounds(self) -> tuple[float, float, float, float]:
        hx, hy = self.size[0] / 2, self.size[1] / 2
        return (self.centre[0] - hx, self.centre[0] + hx, self.centre[1] - hy, self.centre[1] + hy)


@dataclass(frozen=True)
class Compliance:
    """The referee's measure of a stack against a spec. Counts and shares are measured for
    every rule; `broken` lists the rules the spec has on that the stack breaks."""

    cartons: int
    load_height_m: float
    load_mass_kg: float
    perimeter_labelled: int  # perimeter cartons with a label face
    label_out: int  # of those, showing it outwards
    label_out_pct: float | None  # None when no labelled carton stands on the perimeter
    crush_violations: list[dict[str, Any]] = field(default_factory=list)
    fragile_violations: list[dict[str, Any]] = field(default_factory=list)
    weight_order_inversions: list[dict[str, Any]] = field(default_factory=list)
    group_splits: int = 0  # extra pieces the groups are split into (0: every group together)
    broken: list[str] = field(default_factory=list)  # hard and soft rules on and not kept
    hard_violations: int = 0  # height and mass (one each) plus crush and fragile counts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _overlap(a: Sequence[float], b: Sequence[float]) -> float:
    dx = min(a[1], b[1]) - max(a[0], b[0])
    dy = min(a[3], b[3]) - max(a[2], b[2])
    return dx * dy if dx > 0 and dy > 0 else 0.0


def _gap(a: Sequence[float], b: Sequence[float]) -> float:
    """Horizontal gap [m] between two footprints (0 when they touch or overlap)."""
    dx = max(a[0] - b[1], b[0] - a[1], 0.0)
    dy = max(a[2] - b[3], b[2] - a[3], 0.0)
    return math.hypot(dx, dy)


def supports(items: Sequence[StackItem]) -> dict[int, dict[int, float]]:
    """For each carton (by index), the cartons it rests on and the contact area [m^2]."""
    out: dict[int, dict[int, float]] = {i: {} for i in range(len(items))}
    for i, up in enumerate(items):
        for j, low in enumerate(items):
            if i == j or abs(up.bottom - low.top) > SUPPORT_GAP_M:
                continue
            area = _overlap(up.bounds(), low.bounds())
            if area >= MIN_CONTACT_M2:
                out[i][j] = area
    return out


def label_normal(face: str, yaw: float) -> tuple[float, float] | None:
    """The world xy direction the label face looks along, or None for a carton without one."""
    local = {'+x': (1.0, 0.0), '-x': (-1.0, 0.0), '+y': (0.0, 1.0), '-y': (0.0, -1.0)}.get(face)
    if local is None:
        return None
    c, s = math.cos(yaw), math.sin(yaw)
    return (c * local[0] - s * local[1], s * local[0] + c * local[1])


def load_shares(item: StackItem, items: Sequence[StackItem], deck: Deck) -> dict[int, float]:
    """The share of `item`'s load (its mass and what rests on it) that each carton of `items`
    (by index) carries: in proportion to the contact areas, the deck taking its own share where
    the carton stands on it. Empty when it rests on nothing the graph sees."""
    box = item.bounds()
    areas = {}
    for j, low in enumerate(items):
        if low is item or abs(item.bottom - low.top) > SUPPORT_GAP_M:
            continue
        area = _overlap(box, low.bounds())
        if area >= MIN_CONTACT_M2:
            areas[j] = area
    on_deck = abs(item.bottom - deck.top) <= SUPPORT_GAP_M
    total = sum(areas.values()) + (_overlap(box, deck.bounds()) if on_deck else 0.0)
    return {j: a / total for j, a in areas.items()} if total > 0.0 else {}


def load_above(items: Sequence[StackItem], deck: Deck) -> list[float]:
    """The mass [kg] resting on each carton, propagated top-down through the support graph."""
    above = [0.0] * len(items)
    for i in sorted(range(len(items)), key=lambda k: -items[k].bottom):
        load = items[i].mass_kg + above[i]
        for j, share in load_shares(items[i], items, deck).items():
            above[j] += load * share
    return above


def check_compliance(
    spec: PalletSpec, items: Sequence[StackItem], catalogue: Any, deck: Deck
) -> Compliance:
    """Measure the stack `items` against `spec`. catalogue: core.config Catalogue (each type's
    rules and crush limit)."""
    graph = supports(items)
    above = load_above(items, deck)
    rules = [catalogue.rules(it.type_name) for it in items]
    fragile_types = set(spec.fragile.types) if spec.fragile else set()
    limits = dict(spec.crush.limits_kg) if spec.crush else {}

    crush = []
    for i, it in enumerate(items):
        limit = limits.get(it.type_name, catalogue.crush_limit_kg(it.type_name, it.dims))
        if above[i] > limit:
            crush.append(
                {
                    'package_id': it.package_id,
                    'above_kg': round(above[i], 2),
                    'limit_kg': round(limit, 2),
                }
            )
    fragile, inversions = [], []
    tol = spec.weight_order.tolerance_kg if spec.weight_order else _DEFAULT_TOLERANCE_KG
    for i, below in graph.items():
        for j in sorted(below):
            up, low = items[i], items[j]
            if rules[j].fragile or low.type_name in fragile_types:
                fragile.append({'package_id': low.package_id, 'under': up.package_id})
            if up.mass_kg > low.mass_kg + tol:
                inversions.append(
                    {'package_id': up.package_id, 'mass_kg': round(up.mass_kg, 3),
                     'on': low.package_id, 'on_mass_kg': round(low.mass_kg, 3)}
                )  # fmt: skip

    band = spec.label_out.perimeter_band_m if spec.label_out else _DEFAULT_BAND_M
    dx0, dx1, dy0, dy1 = deck.bounds()
    labelled = out = 0
    for it, r in zip(items, rules, strict=True):
        x0, x1, y0, y1 = it.bounds()
        sides = [
            n
            for n, d in (
                ((-1.0, 0.0), x0 - dx0),
                ((1.0, 0.0), dx1 - x1),
                ((0.0, -1.0), y0 - dy0),
                ((0.0, 1.0), dy1 - y1),
            )
            if d <= band
        ]
        normal = label_normal(r.label, it.yaw)
        if not sides or normal is None:
            continue
        labelled += 1
        cos45 = math.sqrt(0.5)
        out += any(normal[0] * n[0] + normal[1] * n[1] >= cos45 for n in sides)

    key = spec.group_by.key if spec.group_by else 'group'
    groups: dict[str, list[int]] = {}
    for i, (it, r) in enumerate(zip(items, rules, strict=True)):
        groups.setdefault(it.type_name if key == 'type' else r.group, []).append(i)
    splits = 0
    for members in groups.values():
        seen: set[int] = set()
        for start in members:
            if start in seen:
                continue
            splits += 1
            todo = [start]
            seen.add(start)
            while todo:
                a = todo.pop()
                for b in members:
                    if b not in seen and _together(items[a], items[b], graph, a, b):
                        seen.add(b)
                        todo.append(b)
        splits -= 1

    height = max((it.top for it in items), default=deck.top) - deck.top
    mass = sum(it.mass_kg for it in items)
    broken = []
    hard = 0
    if spec.max_load_height_m is not None and height > spec.max_load_height_m:
        broken.append('max_load_height_m')
        hard += 1
    if spec.max_load_mass_kg is not None and mass > spec.max_load_mass_kg:
        broken.append('max_load_mass_kg')
        hard += 1
    if spec.crush is not None and crush:
        broken.append('crush')
        hard += len(crush)
    if spec.fragile is not None and fragile:
        broken.append('fragile')
        hard += len(fragile)
    if spec.weight_order is not None and inversions:
        broken.append('weight_order')
    if spec.label_out is not None and out < labelled:
        broken.append('label_out')
    if spec.group_by is not None and splits:
        broken.append('group_by')
    return Compliance(
        cartons=len(items),
        load_height_m=round(height, 4),
        load_mass_kg=round(mass, 3),
        perimeter_labelled=labelled,
        label_out=out,
        label_out_pct=round(100.0 * out / labelled, 1) if labelled else None,
        crush_violations=crush,
        fragile_violations=fragile,
        weight_order_inversions=inversions,
        group_splits=splits,
        broken=broken,
        hard_violations=hard,
    )


def _together(
    a: StackItem, b: StackItem, graph: Mapping[int, Mapping[int, float]], ia: int, ib: int
) -> bool:
    """Two cartons are together when one rests on the other, or they stand side by side
    (their heights overlap) within NEIGHBOUR_GAP_M."""
    if ib in graph[ia] or ia in graph[ib]:
        return True
    heights_meet = min(a.top, b.top) - max(a.bottom, b.bottom) > 0.0
    return heights_meet and _gap(a.bounds(), b.bounds()) <= NEIGHBOUR_GAP_M


def stack_items(placements: Sequence[Any]) -> list[StackItem]:
    """The cartons of core.contracts Placements (PALLET frame: the deck centred at the origin,
    its top at z 0) whose centre is above the deck: placed within tolerance or not (a carton
    off the pallet is not on it)."""
    return [
        StackItem(
            p.package_id,
            p.package_type,
            (p.actual_pose[0], p.actual_pose[1], p.actual_pose[2]),
            tuple(p.dims_m),
            p.actual_pose[3],
            p.mass_kg,
        )
        for p in placements
        if p.actual_pose[2] > 0.0
    ]


def pallet_deck(pallet_size: Sequence[float]) -> Deck:
    """The deck in the PALLET frame: centred at the origin, its top at z 0."""
    return Deck(centre=(0.0, 0.0), size=(float(pallet_size[0]), float(pallet_size[1])), top=0.0)


def measure_stack(
    spec: PalletSpec, placements: Sequence[Any], catalogue: Any, pallet_size: Sequence[float]
) -> Compliance:
    """check_compliance on the referee's measured placements (stack_items, pallet_deck)."""
    return check_compliance(spec, stack_items(placements), catalogue, pallet_deck(pallet_size))
