"""The oracle flag: the one place a run is judged to read simulator truth (ARCHITECTURE: referee
vs oracle).

Both wirings ask it. The in-process loop passes the components it constructed, each of which
says whether it reads truth (its `oracle` attribute). The node graph passes the modes its nodes
report they run, read back from their parameters: a mode that could not be read counts as truth,
so the flag errs towards `oracle true`. Only the referee may read truth without setting it.
"""

from __future__ import annotations

from palletizer.core.errors import InvalidType
from palletizer.core.vocab import Closed, GaugeMode, PerceptionMode

__all__ = ['oracle_flag', 'reads_truth']

# The modes that read no simulator truth; every other member of these sets does.
TRUTH_FREE = frozenset({PerceptionMode.cameras, GaugeMode.wrench})


def reads_truth(kind: type[PerceptionMode] | type[GaugeMode], name: str) -> bool:
    """Whether a node that reports running mode `name` of `kind` reads simulator truth; a name
    outside the set (or '?', unreadable) counts as truth."""
    try:
        return kind(name) not in TRUTH_FREE
    except ValueError:
        return True


def oracle_flag(*parts: object) -> bool:
    """True if any part reads simulator truth.

    A part is a constructed component (perception, gauge, planner) with a bool `oracle`
    attribute, a mode member (PerceptionMode, GaugeMode), or a bool already decided by
    `reads_truth`. Anything else, a mode's bare name above all, is refused: passed where a
    component belongs, it would otherwise count as truth-free.
    """
    flags = []
    for p in parts:
        if isinstance(p, bool):
            flags.append(p)
        elif isinstance(p, PerceptionMode | GaugeMode):
            flags.append(p not in TRUTH_FREE)
        elif not isinstance(p, str | Closed) and isinstance(getattr(p, 'oracle', None), bool):
            flags.append(p.oracle)  # type: ignore[attr-defined]
        else:
            raise InvalidType(
                f'{p!r} is not a perception, gauge or planner component (no oracle flag), a '
                'mode or a flag'
            )
    return any(flags)
