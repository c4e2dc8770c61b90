"""The runs on disk as the MCP server reads them back, and its own call log beside them.

list_runs and get_run read the runs folder the server's episodes write to, through the operator
panel's history (panel.scene.list_runs): disk is the source of truth, a replica is not read.
The planner of a run this server started is read from its call log (mcp_calls.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from palletizer.cli.mcp_calls import CallLog
from palletizer.cli.mcp_models import RunDetail, RunList, RunSummary
from palletizer.cli.mcp_preview import jsonl_rows
from palletizer.core.errors import PalletizerError
from palletizer.panel.scene import list_runs

__all__ = ['RUNS_LIMIT', 'RUNS_LIMIT_MAX', 'RunRefusal', 'Runs']

RUNS_LIMIT = 20  # list_runs' default
RUNS_LIMIT_MAX = 200  # the most runs one list_runs answers with
SOURCE = 'disk (the runs folder: the source of truth; a telemetry replica is not read)'


class RunRefusal(PalletizerError):
    """A run id that names no run in the runs folder, or a limit out of range."""


class Runs:
    """The runs folder, read-only: its runs newest first, and one run's episode lines."""

    def __init__(self, runs_dir: Path, calls: CallLog | None = None) -> None:
        self.runs_dir = runs_dir
        self.calls = calls

    def _planners(self) -> dict[str, str]:
        """Run folder name -> planner, from the run_episode calls this server logged."""
        out: dict[str, str] = {}
        for c in [] if self.calls is None else self.calls.lines():
            run_dir, planner = c.get('run_dir'), (c.get('arguments') or {}).get('planner')
            if c.get('tool') == 'run_episode' and run_dir and planner:
                out[Path(run_dir).name] = str(planner)
        return out

    def _summary(self, row: dict[str, Any], planners: dict[str, str]) -> RunSummary:
        eps = jsonl_rows(self.runs_dir / row['name'] / 'episodes.jsonl')
        n, ok, aborted = row['episodes'], row['succeeded'], row['aborted']
        outcome: Literal['success', 'failure', 'aborted', 'open'] = (
            'open' if n == 0 else 'success' if ok == n else 'aborted' if aborted else 'failure'
        )
        recorded = next((e['planner'] for e in eps if e.get('planner')), None)
        return RunSummary(
            id=row['name'],
            level=row['level'],
            task=row['task'],
            seeds=[int(e['seed']) for e in eps if 'seed' in e],
            planner=recorded or planners.get(row['name']),
            episodes=n,
            succeeded=ok,
            aborted=aborted,
            cartons=row['cartons'],
            placed=row['placed'],
            outcome=outcome,
            oracle=row['oracle'],
        )

    def list(self, limit: int = RUNS_LIMIT) -> RunList:
        if not 1 <= limit <= RUNS_LIMIT_MAX:
            raise RunRefusal(f'limit {limit}; allowed 1-{RUNS_LIMIT_MAX}')
        rows = list_runs(self.runs_dir)
        planners = self._planners()
        return RunList(
            runs=[self._summary(r, planners) for r in rows[:limit]],
            total=len(rows),
            runs_dir=str(self.runs_dir),
            source=SOURCE,
        )

    def get(self, run_id: str) -> RunDetail:
        rows = {r['name']: r for r in list_runs(self.runs_dir)}
        if run_id not in rows:  # only a listed folder: no path leaves the runs folder
            newest = ', '.join(list(rows)[:3]) or 'none yet'
            raise RunRefusal(
                f'run_id {run_id!r} is not a run in {self.runs_dir}; expected a run id from '
                f'list_runs (newest: {newest})'
            )
        return RunDetail(
            run=self._summary(rows[run_id], self._planners()),
            episodes=jsonl_rows(self.runs_dir / run_id / 'episodes.jsonl'),
            run_dir=str(self.runs_dir / run_id),
        )
