"""A pallet spec's hard rules as a planner's filter (docs/pallet-spec.md "Planning to a spec").

The soft rules the planner scores so far: weight_order. A candidate's score loses the rule's
weight times the share of its footprint that would rest on cartons lighter than it by more than
the tolerance (1.0: a whole inversion costs as much as the best score can be).

The planner believes a stack (its recorded placements, with the weighed masses and the types
read from the cartons' labels). A candidate slot is refused when the stack with the carton there
breaks a hard rule of the spec that the believed stack did not break already: the load height,
the load mass, a crush limit (the mass propagated down the support graph, core/compliance.py)
or a fragile carton under it. A carton's crush limit, fragility and label face are its type's
catalogue attributes, looked up by the type its label names, as a warehouse system looks up a
scanned SKU: no simulator truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from palletizer.core.compliance import SUPPORT_GAP_M, measure_stack
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
        self._base_key: tuple[str, ...] | None = None
        self._base: dict[str, int] = {}

    @property
    def active(self) -> bool:
        """Whether the spec has any hard rule on."""
        return any(getattr(self.spec, r) is not None for r in HARD_RULES)

    @property
    def scores(self) -> bool:
        """Whether the spec has a soft rule the planner scores (weight_order, weight > 0)."""
        w = self.spec.weight_order
        return w is not None and w.weight > 0.0

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
        placements lighter than `spec` by more than the tolerance."""
        out = np.zeros(len(x))
        w = self.spec.weight_order
        if w is None or w.weight <= 0.0 or not len(x):
            return out
        quarter = np.rint(np.asarray(yaw) / (math.pi / 2)).astype(int) % 2
        L, W, _ = spec.dims_m
        hx = np.where(quarter == 1, W, L) / 2.0
        hy = np.where(quarter == 1, L, W) / 2.0
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
        return w.weight * np.minimum(inverted / (4.0 * hx * hy), 1.0)

    def _counts(self, placements: Sequence[Placement]) -> dict[str, int]:
        c = measure_stack(self.spec, placements, self.catalogue, self.pallet_size)
        return {
            'max_load_height_m': int('max_load_height_m' in c.broken),
            'max_load_mass_kg': int('max_load_mass_kg' in c.broken),
            'crush': len(c.crush_violations) if self.spec.crush is not None else 0,
            'fragile': len(c.fragile_violations) if self.spec.fragile is not None else 0,
        }

    def breaks(self, placements: Sequence[Placement], new: Placement) -> str | None:
        """The first hard rule (HARD_RULES order) that the believed stack `placements` with
        `new` added breaks more than the stack alone does, or None."""
        if not self.active:
            return None
        key = tuple(p.package_id for p in placements)
        if key != self._base_key:
            self._base = self._counts(placements)
            self._base_key = key
        after = self._counts([*placements, new])
        for rule in HARD_RULES:
            if after[rule] > self._base[rule]:
                return rule
        return None
