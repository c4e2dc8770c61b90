"""The planner node's pallet spec: the one in force and one set for the next episode, and the
JSON both services carry (docs/pallet-spec.md §5)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from palletizer.core.pallet_spec import PalletSpec, SpecError, SpecProblem, load_spec

__all__ = ['PlannerSpec', 'parse_spec_json', 'spec_json']

_NONE: Any = object()  # no spec waits


def parse_spec_json(text: str, types: Iterable[str]) -> PalletSpec | None:
    """The spec in `text` (a JSON object; empty: none), validated against the schema and the
    catalogue's types; None for no spec or one with no rule on. Raises SpecError."""
    text = text.strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        problem = SpecProblem('(spec)', text[:80], f'a JSON object ({exc})')
        raise SpecError('spec_json', [problem]) from None
    spec = load_spec(doc, types, where='spec_json')
    return None if spec.empty else spec


def spec_json(spec: PalletSpec | None) -> str:
    """The normalised spec as compact JSON; empty for none."""
    return '' if spec is None else json.dumps(spec.to_dict(), separators=(',', ':'))


class PlannerSpec:
    """The spec the planner plans to now, and one set while an episode runs, which waits for
    the next episode (apply_pending, at the planner's reset)."""

    def __init__(self, spec: PalletSpec | None) -> None:
        self.now = None if spec is None or spec.empty else spec
        self._pending: Any = _NONE

    @property
    def has_pending(self) -> bool:
        return self._pending is not _NONE

    def set(self, spec: PalletSpec | None, now: bool) -> None:
        if now:
            self.now, self._pending = spec, _NONE
        else:
            self._pending = spec

    def apply_pending(self) -> None:
        if self._pending is not _NONE:
            self.now, self._pending = self._pending, _NONE
