"""Benchmark of the MuJoCo cell: physics real-time factor, depth rendering, stability protocol."""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any

import numpy as np

from palletizer.core.contracts import EUR_DECK_Z

__all__ = ['bench_cell', 'main', 'stacked_placements']

# Observe/rest pose (docs/cell.md §3.1): clear of the pallet, so the arm never touches the stack.
_REST = np.array([1.0472, -2.0944, 1.5708, -1.5708, -1.5708, 0.0])
_DECK = EUR_DECK_Z


def stacked_placements(level_id: int = 16, seed: int = 1, n: int = 20) -> list[Any]:
    """`n` cartons of a level's load in four centred columns on the pallet, big ones low.

    The pallet is split into 2 x 2 cells of 0.60 x 0.40 m; carton k goes to cell k % 4.
    """
    from palletizer.core.loads import draw_load
    from palletizer.sim.scene import CartonPlacement

    draws = list(draw_load(level_id, seed))[:n]
    cells = [(0.30, -0.20), (0.90, -0.20), (0.30, 0.20), (0.90, 0.20)]
    columns: list[list[Any]] = [[] for _ in cells]
    for k, d in enumerate(sorted(draws, key=lambda d: -d.dims[0] * d.dims[1])):
        columns[k % len(cells)].append(d)
    out = []
    for (x, y), col in zip(cells, columns, strict=True):
        z = _DECK
        for d in col:
            out.append(CartonPlacement(d, (x, y, z + d.dims[2] / 2 + 0.001)))
            z += d.dims[2] + 0.001
    return out


def _stacked_cell(sleep: bool = False) -> Any:
    from palletizer.sim.cell import Cell, CellOptions
    from palletizer.sim.scene import SceneOptions
    from palletizer.sim.servo import Trajectory

    opts = CellOptions(scene=SceneOptions(sleep=sleep))
    cell = Cell(cartons=stacked_placements(), options=opts)
    z = np.zeros((1, 6))
    cell.track(Trajectory(np.zeros(1), _REST[None], z, z), speed=0)
    cell.settle(1.0)
    return cell


def _rtf(cell: Any, seconds: float) -> float:
    steps = int(round(seconds / cell.dt))
    t0 = time.perf_counter()
    cell.step(steps)
    return seconds / (time.perf_counter() - t0)


def bench_cell(*, physics_seconds: float = 10.0, depth_repeats: int = 5) -> dict[str, float]:
    """Measure the cell; returns physics_rtf_20, depth_ms_640x480, stability_protocol_s,
    peak_rss_mb (targets: >= 20, <= 15 ms per camera, <= 30 s wall).

    physics_rtf_20 runs the cell as configured (configs/cell.yaml physics.sleep: island
    sleeping on); physics_rtf_20_awake is the same stack with sleeping off, for comparison."""
    from palletizer.core.config import load_config

    configured = load_config().cell.physics.sleep
    rtf = _rtf(_stacked_cell(sleep=configured), physics_seconds)
    cell = _stacked_cell()
    rtf_awake = _rtf(cell, physics_seconds)

    names = ['top', 'diag_a', 'diag_b', 'station']
    cell.capture(names, 640, 480, rgb=False)  # warm-up: context creation
    t0 = time.perf_counter()
    for _ in range(depth_repeats):
        cell.capture(names, 640, 480, rgb=False)
    depth_ms = (time.perf_counter() - t0) / (depth_repeats * len(names)) * 1e3
    cell.close()

    t0 = time.perf_counter()
    report = cell.stability_trials()
    protocol_s = time.perf_counter() - t0
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        'physics_rtf_20': round(rtf, 1),
        'physics_sleep': configured,
        'physics_rtf_20_awake': round(rtf_awake, 1),
        'depth_ms_640x480': round(depth_ms, 2),
        'stability_protocol_s': round(protocol_s, 2),
        'stability_held_all': float(bool(report.summary['held_all'])),
        'peak_rss_mb': round(peak_rss_mb, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the benchmark as one JSON object."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--physics-seconds', type=float, default=10.0, help='simulated seconds [s]')
    ap.add_argument('--depth-repeats', type=int, default=5, help='captures per camera')
    args = ap.parse_args(argv)
    print(
        json.dumps(
            bench_cell(physics_seconds=args.physics_seconds, depth_repeats=args.depth_repeats)
        )
    )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
