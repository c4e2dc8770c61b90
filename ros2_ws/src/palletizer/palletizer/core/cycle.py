"""A carton's cycle as consecutive phases of simulated time, each ending where the next begins.

The episode loop marks the start of each phase as it gets there (core/episode.py); an executor
that knows more adds the phases inside its pick or place (ExecutorPort marks). A cycle runs
from the end of the previous carton's settle (the episode's start for the first) to the end of
this carton's settle, so the cycles of an episode tile it up to its last settle and every
second is attributed to exactly one phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from palletizer.core.vocab import CyclePhase

__all__ = ['CycleClock', 'PhaseSpan', 'phase_totals', 'spans_from_payload', 'spans_payload']

# Boundaries are kept in whole milliseconds, so the durations written to the events sum
# exactly to the cycle time written beside them (rounding each duration would not).
_MS = 1000


@dataclass(frozen=True)
class PhaseSpan:
    """One phase of a cycle: [start_s, end_s) in simulated seconds since the episode's reset."""

    phase: CyclePhase
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


class CycleClock:
    """Phase marks of the cycle in progress. A mark closes the open phase at its time and
    opens the next; a mark earlier than the last one is moved up to it (a clock never runs
    back), and a mark of the phase already open changes nothing."""

    def __init__(self) -> None:
        self._marks: list[tuple[CyclePhase, int]] = []

    def begin(self, phase: CyclePhase, t: float) -> None:
        """Start a new cycle at t [s] in `phase`, forgetting any open one."""
        self._marks = [(phase, _ms(t))]

    @property
    def open(self) -> bool:
        return bool(self._marks)

    @property
    def current(self) -> CyclePhase | None:
        return self._marks[-1][0] if self._marks else None

    def mark(self, phase: CyclePhase, t: float) -> None:
        """`phase` begins at t [s]; starts a cycle when none is open."""
        if not self._marks:
            self.begin(phase, t)
            return
        last_phase, last_t = self._marks[-1]
        if phase is last_phase:
            return
        at = max(_ms(t), last_t)
        if at == last_t:
            # The open phase took no time: the new one replaces it.
            self._marks[-1] = (phase, at)
            if len(self._marks) > 1 and self._marks[-2][0] is phase:
                self._marks.pop()
            return
        self._marks.append((phase, at))

    def marks_within(
        self, marks: Iterable[tuple[CyclePhase, float]], t0: float, t1: float
    ) -> None:
        """An executor's marks of a call that ran from t0 to t1 [s], each held inside it."""
        lo, hi = min(t0, t1), max(t0, t1)
        for phase, t in marks:
            self.mark(phase, min(max(t, lo), hi))

    def close(self, t: float) -> tuple[PhaseSpan, ...]:
        """End the open cycle at t [s] and return its spans (zero-length ones left out); the
        clock then has no open cycle. Empty when none was open."""
        if not self._marks:
            return ()
        end = max(_ms(t), self._marks[-1][1])
        bounds = [m[1] for m in self._marks[1:]] + [end]
        spans = tuple(
            PhaseSpan(phase, start / _MS, stop / _MS)
            for (phase, start), stop in zip(self._marks, bounds, strict=True)
            if stop > start
        )
        self._marks = []
        return spans


def _ms(t: float) -> int:
    return int(round(float(t) * _MS))


def spans_payload(spans: Sequence[PhaseSpan]) -> dict[str, Any]:
    """The settle event's cycle keys: cycle_start_s, cycle_s and phases, a list of
    [phase, seconds] in order (ms resolution; the seconds sum to cycle_s)."""
    if not spans:
        return {}
    start, end = _ms(spans[0].start_s), _ms(spans[-1].end_s)
    return {
        'cycle_start_s': start / _MS,
        'cycle_s': (end - start) / _MS,
        'phases': [[s.phase.value, (_ms(s.end_s) - _ms(s.start_s)) / _MS] for s in spans],
    }


def spans_from_payload(payload: Mapping[str, Any]) -> tuple[PhaseSpan, ...]:
    """The spans a settle event's payload carries (spans_payload's inverse); () without them.
    Raises ConfigError on a phase name outside CyclePhase."""
    rows = payload.get('phases')
    if not rows:
        return ()
    t = _ms(float(payload.get('cycle_start_s', 0.0)))
    out = []
    for name, seconds in rows:
        stop = t + _ms(float(seconds))
        out.append(PhaseSpan(CyclePhase.parse(name, 'phases[].phase'), t / _MS, stop / _MS))
        t = stop
    return tuple(out)


def phase_totals(spans: Iterable[PhaseSpan]) -> dict[CyclePhase, float]:
    """Seconds per phase [s], every CyclePhase present (0.0 where it took no time)."""
    totals_ms = dict.fromkeys(CyclePhase, 0)
    for s in spans:
        totals_ms[s.phase] += _ms(s.end_s) - _ms(s.start_s)
    return {p: ms / _MS for p, ms in totals_ms.items()}
