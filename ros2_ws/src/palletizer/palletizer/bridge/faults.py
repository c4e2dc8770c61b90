"""Faults the hardware profile injects, as a real UR10e cell has them (docs/real-cell.md).

A simulator is usually too polite: its arm never stops on its own and its cups never let go.
A real cell's do. Each fault is written `kind@goal[:share]`:

- `protective_stop@N:S`: the controller stops the arm S of the way through the N-th trajectory
  goal (as when it strikes something): safety mode PROTECTIVE_STOP, the External Control program
  stopped, the goal aborted;
- `program_stop@N:S`: the External Control program stops there (the pendant's stop, a lost
  connection); the safety mode stays NORMAL, the goal is aborted;
- `vacuum_loss@N:S`: the cups lose the carton S of the way through the N-th goal that begins
  with a carton held (a torn cup, a kinked hose); the controller knows nothing of it and the
  arm moves on, the vacuum level on the tool's analog input falls.

N counts from 1; S is a share of the goal's trajectory time in [0, 1], 0.5 when left out. The
scenario's faults come from the cell bridge's `faults` parameter, the palletizer never sees them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from palletizer.core.errors import PalletizerError

__all__ = ['KINDS', 'Fault', 'FaultPlan', 'parse_faults']

KINDS = ('protective_stop', 'program_stop', 'vacuum_loss')


@dataclass(frozen=True)
class Fault:
    kind: str
    goal: int  # 1-based: of all goals, or of the goals begun holding a carton (vacuum_loss)
    share: float = 0.5  # of the goal's trajectory time


def parse_faults(specs: list[str] | tuple[str, ...]) -> list[Fault]:
    """Faults from their `kind@goal[:share]` strings; PalletizerError naming a bad one."""
    out = []
    for spec in specs:
        text = spec.strip()
        if not text:
            continue
        form = f'expected kind@goal[:share] with kind one of {", ".join(KINDS)}'
        kind, at, rest = text.partition('@')
        if not at or kind not in KINDS:
            raise PalletizerError(f'fault {spec!r}: {form}')
        goal_text, _, share_text = rest.partition(':')
        try:
            goal = int(goal_text)
            share = float(share_text) if share_text else 0.5
        except ValueError:
            raise PalletizerError(f'fault {spec!r}: {form}') from None
        if goal < 1 or not 0.0 <= share <= 1.0:
            raise PalletizerError(
                f'fault {spec!r}: goal {goal_text} and share {share_text or 0.5}; expected a '
                'goal number from 1 and a share from 0 to 1'
            )
        out.append(Fault(kind, goal, share))
    return out


@dataclass
class FaultPlan:
    """Which fault falls on which goal, each at most once."""

    faults: list[Fault]
    goals: int = 0  # goals begun
    held_goals: int = 0  # goals begun with a carton held
    _now: list[Fault] = field(default_factory=list)

    def begin_goal(self, holding: bool) -> None:
        """A trajectory goal begins; `holding`: the cups hold a carton."""
        self.goals += 1
        self.held_goals += int(holding)

        def falls_here(f: Fault) -> bool:
            if f.kind == 'vacuum_loss':
                return holding and f.goal == self.held_goals
            return f.goal == self.goals

        self._now = [f for f in self.faults if falls_here(f)]

    def due(self, share: float) -> Fault | None:
        """The fault of this goal whose moment has come (once), or None."""
        for f in self._now:
            if share >= f.share - 1e-9:
                self._now.remove(f)
                self.faults.remove(f)
                return f
        return None
