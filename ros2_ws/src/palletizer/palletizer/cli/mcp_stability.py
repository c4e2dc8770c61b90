"""`check_stability`: the jolt, beam and EUMOS trials on a run's stack, in the simulated cell.

The episode's own world is gone once its run ends, so the stack is rebuilt from what telemetry
recorded: each placed carton of the episode (placements.jsonl) at its measured pose, with its
dimensions and mass, in a fresh simulated cell (sim.cell.Cell). It settles, then the trials
of configs/stability.yaml run on it (sim/stability.py, as `scripts/palletize --stability` runs
them at the end of an episode). Nothing of the real cell is touched; with --robot ur the tool
is off.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from palletizer.cli.mcp_cell import Cell, CellRefusal
from palletizer.cli.mcp_preview import read_stack
from palletizer.cli.mcp_runs import Runs
from palletizer.core.config import load_config
from palletizer.core.contracts import PalletGeometry, Placement
from palletizer.core.measure import pallet_to_world

__all__ = ['SETTLE_S', 'StabilityResult', 'Trial', 'check_stability']

SETTLE_S = 0.5  # [s] the rebuilt stack settles before the trials
LIFT_M = 0.002  # [m] per layer: recorded poses sink a little into the carton below


class _Result(BaseModel):
    model_config = ConfigDict(extra='forbid')


class Trial(_Result):
    kind: str = Field(description='jolt, beam or eumos')
    axis: str
    peak_g: float = Field(description='peak acceleration [g]')
    held: bool
    score: float = Field(description='0-100 (100: nothing moved)')
    max_displacement_m: float
    fell: list[str] = Field(description='the cartons that fell')


class StabilityResult(_Result):
    stack: str = Field(description='the run and seed whose stack was tested')
    cartons: int = Field(description='placed cartons rebuilt in the simulated cell')
    left_out: int = Field(description='attempted cartons not placed, so not rebuilt')
    held_all: bool = Field(description='whether the stack held every jolt')
    summary: dict[str, Any] = Field(
        description="the trials' summary, as the episode line's metrics.stability holds it"
    )
    trials: list[Trial]


def _which(cell: Cell, runs: Runs, run_id: str | None, seed: int | None) -> tuple[Path, int]:
    """The run folder and seed whose stack is tested (CellRefusal / RunRefusal naming why)."""
    current = cell.run_info()
    if run_id is None:
        if cell.running:
            raise CellRefusal(
                'an episode is running: its stack is still being built; wait for it or stop it, '
                'or name a finished run_id from list_runs'
            )
        if current.run_dir is None or cell.episode is None:
            raise CellRefusal('no stack yet: run_episode first, or name a run_id from list_runs')
        return Path(current.run_dir), seed or cell.episode.seed
    detail = runs.get(run_id)  # a bad id is named
    if cell.running and current.run_dir and Path(current.run_dir).name == run_id:
        raise CellRefusal(f'run {run_id} is running: its stack is still being built')
    if seed is None:
        if not detail.run.seeds:
            raise CellRefusal(f'run {run_id} has no episode line yet; name its seed')
        seed = detail.run.seeds[-1]
    return Path(detail.run_dir), seed


def _scene(stack: list[Placement]) -> list[Any]:
    from palletizer.core.loads import CartonDraw
    from palletizer.sim.scene import CartonPlacement

    cfg = load_config()
    pallet = PalletGeometry.from_config(cfg.cell.pallet)
    out = []
    for i, p in enumerate(stack):
        x, y, z, yaw = pallet_to_world(p.actual_pose, pallet)
        draw = CartonDraw(
            index=i,
            package_id=p.package_id,
            type_name=p.package_type,
            dims=(p.dims_m[0], p.dims_m[1], p.dims_m[2]),
            mass=p.mass_kg,
            cog_offset=(0.0, 0.0, 0.0),  # the weighed offsets are not in the placements
            rgba=(0.7, 0.5, 0.3, 1.0),
            friction=cfg.catalogue.friction,
        )
        quat = (math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0))
        out.append(CartonPlacement(draw, (x, y, z + LIFT_M * p.layer), quat))
    return out


def check_stability(
    cell: Cell, runs: Runs, run_id: str | None = None, seed: int | None = None
) -> StabilityResult:
    """Rebuild the stack of `run_id` (default: the server's last episode) and run the trials."""
    cell.sim_only('check_stability')
    run_dir, seed = _which(cell, runs, run_id, seed)
    attempted = read_stack(run_dir, seed)
    placed = [p for p in attempted if p.placed]
    if not placed:
        raise CellRefusal(
            f'run {run_dir.name} seed {seed} has no placed carton to test (list_runs, get_run)'
        )
    from palletizer.sim.cell import Cell as SimCell

    sim = SimCell(cartons=_scene(placed))
    try:
        sim.settle(SETTLE_S)
        rep = sim.stability_trials()
    finally:
        sim.close()
    return StabilityResult(
        stack=f'{run_dir.name} seed {seed}',
        cartons=len(placed),
        left_out=len(attempted) - len(placed),
        held_all=bool(rep.summary['held_all']),
        summary=rep.summary,
        trials=[
            Trial(
                kind=t.kind,
                axis=t.axis,
                peak_g=t.peak_g,
                held=t.held,
                score=t.score,
                max_displacement_m=t.max_displacement,
                fell=list(t.fell),
            )
            for t in rep.trials
        ],
    )
