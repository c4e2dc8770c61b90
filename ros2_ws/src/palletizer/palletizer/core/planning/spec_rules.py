"""A pallet spec's hard rules as a planner's filter (docs/pallet-spec.md "Planning to a spec").

The planner believes a stack (its recorded placements, with the weighed masses and the types
read from the cartons' labels). A candidate slot is refused when the stack with the carton there
breaks a hard rule of the spec that the believed stack did not break already: the load height,
the load mass, a crush limit (the mass propagated down the support graph, core/compliance.py)
or a fragile carton under it. A carton's crush limit, fragility and label face are its type's
catalogue attributes, looked up by the type its label names, as a warehouse system looks up a
scanned SKU: no simulator truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from palletizer.core.compliance import measure_stack
from palletizer.core.contracts import Placement

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
