"""A pallet spec's hard rules as a planner's filter (docs/pallet-spec.md "Planning to a spec").

The soft rules the planner scores: weight_order, group_by and label_out. A candidate's score loses
weight_order's weight times the share of its footprint that would rest on cartons lighter than
it by more than the tolerance (1.0: a whole inversion costs as much as the best score can be),
and group_by's weight where cartons of its group are on the pallet and it would stand with none
of them (the referee's "together", core/compliance.py), and label_out's weight where it would
stand on the perimeter with its label, as the cameras read it (PackageSpec.label_face), facing
inwards.

The planner believes a stack (its recorded placements, with the weighed masses and the types
read from the cartons' labels). A candidate slot is refused when the carton there would break a
hard rule of the spec: its top over the load height, the load over its mass, a carton it loads
over its crush limit (its mass propagated down the support graph, core/compliance.py), or a
fragile carton under it. A carton's crush limit, fragility and label face are its type's
catalogue attributes, looked up by the type its label names, as a warehouse system looks up a
scanned SKU: no simulator truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from palletizer.core.compliance import (
    NEIGHBOUR_GAP_M,
    SUPPORT_GAP_M,
    StackItem,
    load_above,
    load_shares,
    pallet_deck,
    stack_items,
)
from palletizer.core.contracts import PackageSpec, Placement

if TYPE_CHECKING:
    from palletizer.core.pallet_spec import PalletSpec

__all__ = ['HARD_RULES', 'SpecRules']

HARD_RULES = ('max_load_height_m', 'max_load_mass_kg', 'crush', 'fragile')


class SpecRules:
    """The hard rules of `spec` on a pallet of `pallet_size` (x, y) [m]; catalogue: core.config
    Catalogue (types' crush limits and fragility)."""

    def __init__(self, spec: PalletSpec, catalogue: Any, pallet_size: Sequence[float]) -> None:
        self.spec = spec
        self.catalogue = catalogue
        self.pallet_size = (float(pallet_size[0]), float(pallet_size[1]))
        self.deck = pallet_deck(self.pallet_size)
        self._cached: _Believed | None = None

    @property
    def active(self) -> bool:
        """Whether the spec has any hard rule on."""
        return any(getattr(self.spec, r) is not None for r in HARD_RULES)

    @property
    def scores(self) -> bool:
        """Whether the spec has a soft rule the planner scores (weight_order or group_by, with
        a weight > 0)."""
        return any(
            r is not None and r.weight > 0.0
            for r in (self.spec.weight_order, self.spec.group_by, self.spec.label_out)
        )

    def _group(self, type_name: str) -> str:
        g = self.spec.group_by
        return (
            type_name
            if g is not None and g.key == 'type'
            else self.catalogue.rules(type_name).group
        )

    @staticmethod
    def item(spec: PackageSpec, pose: Sequence[float]) -> StackItem:
        """The carton `spec` at `pose` (x, y, z of its centre, yaw; PALLET frame)."""
        return StackItem(
            spec.package_id,
            spec.type_name,
            (float(pose[0]), float(pose[1]), float(pose[2])),
            spec.dims_m,
            float(pose[3]),
            spec.mass_kg,
        )

    def penalty(
        self,
        placements: Sequence[Placement],
        spec: PackageSpec,
        x: np.ndarray,
        y: np.ndarray,
        yaw: np.ndarray,
        z_base: np.ndarray,
    ) -> np.ndarray:
        """(K,) score penalty of each candidate (pallet frame x, y [m], yaw [rad], base z above
        the deck [m]): weight_order's weight times the share of the footprint resting on
        placements lighter than `spec` by more than the tolerance, plus group_by's weight where
        the carton's group is on the pallet and the candidate is not with it."""
        out = self._weight_order(placements, spec, x, y, yaw, z_base)
        out = np.asarray(out + self._label_out(spec, x, y, yaw), dtype=float)
        g = self.spec.group_by
        if g is None or g.weight <= 0.0 or not len(x):
            return out
        mine = self._group(spec.type_name)
        members = [p for p in placements if self._group(p.package_type) == mine]
        if not members:
            return out
        hx, hy = _half_extents(spec, yaw)
        together = np.zeros(len(x), dtype=bool)
        for p in members:
            px, py, pz, pyaw = p.actual_pose
            q = round(pyaw / (math.pi / 2)) % 2
            ex, ey = (p.dims_m[1], p.dims_m[0]) if q else (p.dims_m[0], p.dims_m[1])
            bottom, top = pz - p.dims_m[2] / 2.0, pz + p.dims_m[2] / 2.0
            gx = np.maximum(np.abs(x - px) - hx - ex / 2.0, 0.0)
            gy = np.maximum(np.abs(y - py) - hy - ey / 2.0, 0.0)
            near = np.hypot(gx, gy) <= NEIGHBOUR_GAP_M
            beside = (np.minimum(z_base + spec.dims_m[2], top) - np.maximum(z_base, bottom)) > 0.0
            on = (np.abs(z_base - top) <= SUPPORT_GAP_M) & (gx <= 0.0) & (gy <= 0.0)
            together |= (near & beside) | on
        return np.asarray(out + g.weight * (~together), dtype=float)

    def _label_out(
        self, spec: PackageSpec, x: np.ndarray, y: np.ndarray, yaw: np.ndarray
    ) -> np.ndarray:
        """label_out's weight where the candidate stands on the perimeter (a side within the
        rule's band of the deck's edge) and its label, as read (spec.label_face), faces none of
        the edges it stands at (the referee's rule, core/compliance.py)."""
        rule = self.spec.label_out
        if rule is None or rule.weight <= 0.0 or not spec.label_face or not len(x):
            return np.zeros(len(x))
        hx, hy = _half_extents(spec, yaw)
        dx0, dx1, dy0, dy1 = self.deck.bounds()
        band = rule.perimeter_band_m
        local = {'+x': (1.0, 0.0), '-x': (-1.0, 0.0), '+y': (0.0, 1.0), '-y': (0.0, -1.0)}
        lx, ly = local[spec.label_face]
        c, s = np.cos(yaw), np.sin(yaw)
        nx, ny = c * lx - s * ly, s * lx + c * ly
        cos45 = math.sqrt(0.5)
        edge = np.zeros(len(x), dtype=bool)
        out = np.zeros(len(x), dtype=bool)
        for (ex, ey), gap in (
            ((-1.0, 0.0), (x - hx) - dx0),
            ((1.0, 0.0), dx1 - (x + hx)),
            ((0.0, -1.0), (y - hy) - dy0),
            ((0.0, 1.0), dy1 - (y + hy)),
        ):
            at = gap <= band
            edge |= at
            out |= at & (nx * ex + ny * ey >= cos45)
        return np.asarray(rule.weight * (edge & ~out), dtype=float)

    def _weight_order(
        self,
        placements: Sequence[Placement],
        spec: PackageSpec,
        x: np.ndarray,
        y: np.ndarray,
        yaw: np.ndarray,
        z_base: np.ndarray,
    ) -> np.ndarray:
        out = np.zeros(len(x))
        w = self.spec.weight_order
        if w is None or w.weight <= 0.0 or not len(x):
            return out
        hx, hy = _half_extents(spec, yaw)
        inverted = np.zeros(len(x))
        for p in placements:
            if not p.mass_kg < spec.mass_kg - w.tolerance_kg:
                continue
            px, py, pz, pyaw = p.actual_pose
            q = round(pyaw / (math.pi / 2)) % 2
            ex, ey = (p.dims_m[1], p.dims_m[0]) if q else (p.dims_m[0], p.dims_m[1])
            top = pz + p.dims_m[2] / 2.0
            dx = np.minimum(x + hx, px + ex / 2) - np.maximum(x - hx, px - ex / 2)
            dy = np.minimum(y + hy, py + ey / 2) - np.maximum(y - hy, py - ey / 2)
            area = np.clip(dx, 0.0, None) * np.clip(dy, 0.0, None)
            inverted += np.where(np.abs(z_base - top) <= SUPPORT_GAP_M, area, 0.0)
        return np.asarray(w.weight * np.minimum(inverted / (4.0 * hx * hy), 1.0), dtype=float)

    def _stack(self, placements: Sequence[Placement]) -> _Believed:
        """The believed stack's items, loads and limits (cached while it is the same)."""
        key = tuple(p.package_id for p in placements)
        if self._cached is None or self._cached.key != key:
            items = stack_items(placements)
            shares = [load_shares(it, items, self.deck) for it in items]
            spec_types = set(self.spec.fragile.types) if self.spec.fragile else set()
            limits = self.spec.crush.limits_kg if self.spec.crush else {}
            self._cached = _Believed(
                key=key,
                items=items,
                shares=shares,
                above=load_above(items, self.deck),
                limits=[
                    limits.get(it.type_name, self.catalogue.crush_limit_kg(it.type_name, it.dims))
                    for it in items
                ],
                fragile=[
                    self.catalogue.rules(it.type_name).fragile or it.type_name in spec_types
                    for it in items
                ],
                mass=sum(it.mass_kg for it in items),
            )
        return self._cached

    def breaks(self, placements: Sequence[Placement], item: StackItem) -> str | None:
        """The first hard rule (HARD_RULES order) the believed stack `placements` breaks with
        the carton `item` (PALLET frame) added: its top over the height limit, the load over the mass limit, a carton that
        it loads (through the support graph) over its crush limit, or a fragile carton under it.
        None when it keeps them all."""
        if not self.active:
            return None
        spec = self.spec
        top = spec.max_load_height_m
        if top is not None and item.top > top:
            return 'max_load_height_m'
        stack = self._stack(placements)
        mass = spec.max_load_mass_kg
        if mass is not None and stack.mass + item.mass_kg > mass:
            return 'max_load_mass_kg'
        shares = load_shares(item, stack.items, self.deck)
        if spec.crush is not None:
            added = [0.0] * len(stack.items)
            todo = [(j, item.mass_kg * f) for j, f in shares.items()]
            while todo:  # down the support graph, which has no cycles (each step goes lower)
                j, load = todo.pop()
                added[j] += load
                todo.extend((k, load * f) for k, f in stack.shares[j].items())
            for j, extra in enumerate(added):
                if extra > 0.0 and stack.above[j] + extra > stack.limits[j]:
                    return 'crush'
        if spec.fragile is not None and any(stack.fragile[j] for j in shares):
            return 'fragile'
        return None


@dataclass(frozen=True)
class _Believed:
    key: tuple[str, ...]
    items: list[StackItem]
    shares: list[dict[int, float]]  # each carton's load shares onto the cartons below
    above: list[float]  # [kg] resting on each
    limits: list[float]  # [kg] crush limit of each
    fragile: list[bool]
    mass: float  # [kg] of the stack


def _half_extents(spec: PackageSpec, yaw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half the footprint along x and y [m] of `spec` at each yaw (rounded to a quarter turn)."""
    quarter = np.rint(np.asarray(yaw) / (math.pi / 2)).astype(int) % 2
    L, W, _ = spec.dims_m
    return np.where(quarter == 1, W, L) / 2.0, np.where(quarter == 1, L, W) / 2.0
