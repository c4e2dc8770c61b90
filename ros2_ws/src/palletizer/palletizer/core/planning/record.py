"""Keep a planner's record of the stack equal to the one a plan request carries.

A plan request carries the episode's placed cartons (and the specs they were weighed with), so
it can be answered by any planner process: the one that saw the episode, or one restarted in
the middle of it. The planner records what it has not recorded yet; when the request's stack
does not extend its record (a new episode, or a restart), it starts over from the request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from palletizer.core.contracts import PackageSpec, Placement
from palletizer.core.planning.base import Planner

__all__ = ['RecordedPlanner']


class RecordedPlanner:
    """A planner plus the package ids it has recorded, synchronised from each request."""

    def __init__(self, build: Callable[[], Planner]) -> None:
        self._build = build
        self.planner = build()
        self.recorded: list[str] = []
        self.rebuilds = 0  # times the record started over (new episode or a restarted stack)

    def reset(self) -> None:
        """A fresh planner with an empty record (a new episode)."""
        self.planner = self._build()
        self.recorded = []

    def sync(self, placements: Sequence[Placement], specs: Sequence[PackageSpec]) -> None:
        """Make the record equal to `placements` (only placed cartons count, as in record()).

        `specs` are the weighed specs of the episode's cartons (any order): the planner folds
        their CoG offsets into the stack's.
        """
        placed = [p for p in placements if p.placed]
        ids = [p.package_id for p in placed]
        if ids[: len(self.recorded)] != self.recorded:
            self.reset()
            self.rebuilds += 1
        by_id = {s.package_id: s for s in specs}
        for p in placed[len(self.recorded) :]:
            spec = by_id.get(p.package_id)
            if spec is not None:
                remember = getattr(getattr(self.planner, 'book', None), 'remember', None)
                if remember is not None:
                    remember(spec)
            self.planner.record(p)
            self.recorded.append(p.package_id)
