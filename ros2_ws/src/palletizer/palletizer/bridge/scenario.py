"""The scenario driver of the hardware profile: it changes the pallet and keeps the referee.

In the hardware profile nobody in the palletizer's graph may reset the world or read its truth.
The scenario stands where the operator and the plant stand on a real cell. It is part of the
simulated world (it runs inside cell_bridge), and no palletizer node can reach it.

- The pallet exchange is a four-phase handshake on the line's I/O (bridge/line.py): the
  palletizer raises `finished_out`; the scenario drops `ready_in` and scores the pallet; the
  palletizer drops `finished_out`; the scenario lays out the next load (the next seed) and
  raises `ready_in`.
- The referee reads the simulator's truth for every carton the line handed over. It matches
  the palletizer's own names (`carton-01`, ... in the order the line handed them over) to the
  load's, and scores the placements the palletizer published against it: the true placement
  error against the plan, and the palletizer's own placement check against the truth.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from palletizer.core.contracts import PalletGeometry
from palletizer.core.fusion import yaw_of_quat
from palletizer.core.measure import world_to_pallet

__all__ = ['CartonScore', 'Scenario', 'carton_name']


def carton_name(k: int) -> str:
    """The palletizer's name for the k-th carton (1-based) the line hands over in an episode."""
    return f'carton-{k:02d}'


def _half_turn(a: float) -> float:
    """|a| folded into [0, pi/2]: a box looks the same turned half a turn."""
    a = abs((a + math.pi) % (2 * math.pi) - math.pi)
    return min(a, math.pi - a)


@dataclass(frozen=True)
class CartonScore:
    """One handed-over carton as the referee sees it (pallet frame, mm and degrees)."""

    carton: str
    package_id: str
    placed: bool  # the palletizer reported it placed on the pallet
    error_xy_mm: float  # the truth against the plan
    error_yaw_deg: float
    within_tolerance: bool
    check_err_mm: float  # the palletizer's own measured pose against the truth
    check_yaw_err_deg: float


class Scenario:
    """Scores each pallet and hands out the next seed. `tolerance_xy` [m] and `tolerance_yaw`
    [rad] are the placement tolerances (cell.yaml episode.tolerance); `out` an episode-line file
    to append to (None: lines are only returned)."""

    def __init__(
        self,
        level: int,
        seed: int,
        pallet: PalletGeometry,
        tolerance_xy: float,
        tolerance_yaw: float,
        out: Path | None = None,
    ) -> None:
        self.level, self.seed, self.pallet = level, seed, pallet
        self.tol_xy, self.tol_yaw = float(tolerance_xy), float(tolerance_yaw)
        self.out = out
        self.placements: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self.lines: list[dict[str, Any]] = []

    def note_placement(
        self, carton: str, planned: Sequence[float], measured: Sequence[float]
    ) -> None:
        """A placement the palletizer published (pallet frame x, y, z, yaw): the plan and what
        its own check measured. A later one for the same carton replaces it."""
        self.placements[carton] = (tuple(planned), tuple(measured))

    def score(self, truth: Any, handed: Sequence[str], sim_only_calls: int) -> dict[str, Any]:
        """The episode line of the pallet now standing: `truth` a Cell.ground_truth() snapshot,
        `handed` the load's package ids in the order the line handed them over."""
        scores = []
        for k, pid in enumerate(handed, start=1):
            name = carton_name(k)
            c = truth.cartons[pid]
            actual = world_to_pallet((*c.pos, yaw_of_quat(c.quat)), self.pallet)
            got = self.placements.get(name)
            if got is None:
                scores.append(CartonScore(name, pid, False, 0.0, 0.0, False, 0.0, 0.0))
                continue
            planned, measured = got
            err = math.hypot(actual[0] - planned[0], actual[1] - planned[1])
            yaw = _half_turn(actual[3] - planned[3])
            check = math.hypot(measured[0] - actual[0], measured[1] - actual[1])
            scores.append(
                CartonScore(
                    name,
                    pid,
                    True,
                    round(err * 1000, 2),
                    round(math.degrees(yaw), 2),
                    err <= self.tol_xy and yaw <= self.tol_yaw,
                    round(check * 1000, 2),
                    round(math.degrees(_half_turn(measured[3] - actual[3])), 2),
                )
            )
        line = {
            'level': self.level,
            'seed': self.seed,
            'oracle': False,
            'scored_by': 'scenario referee (simulator truth, outside the palletizer graph)',
            'load': len(truth.cartons),
            'handed_over': len(handed),
            'placed': sum(s.placed for s in scores),
            'within_tolerance': sum(s.within_tolerance for s in scores),
            'sim_only_calls': int(sim_only_calls),
            'cartons': [asdict(s) for s in scores],
        }
        self.lines.append(line)
        if self.out is not None:
            with self.out.open('a') as f:
                f.write(json.dumps(line) + '\n')
        return line

    def next_seed(self) -> int:
        """The seed of the next pallet; the placements seen so far are forgotten."""
        self.seed += 1
        self.placements.clear()
        return self.seed

    @staticmethod
    def summary(lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Totals over episode lines: cartons handed over and within tolerance, and the own
        check's error against the truth (p95, max) [mm]."""
        errs = sorted(c['check_err_mm'] for ln in lines for c in ln['cartons'] if c['placed'])
        p95 = errs[min(len(errs) - 1, math.ceil(0.95 * len(errs)) - 1)] if errs else None
        return {
            'cartons': sum(ln['handed_over'] for ln in lines),
            'cartons_ok': sum(ln['within_tolerance'] for ln in lines),
            'placement_check_err_mm_p95': p95,
            'placement_check_err_mm_max': errs[-1] if errs else None,
            'sim_only_calls': max((ln['sim_only_calls'] for ln in lines), default=0),
        }
