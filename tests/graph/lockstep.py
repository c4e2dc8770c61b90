"""The in-process loop's episode line, to hold a graph episode to (lockstep determinism:
docs/architecture.md §4)."""

from __future__ import annotations

import json
from pathlib import Path


def in_process_line(
    level: int, seed: int, git_sha: str, configs: Path | None = None, spec: Path | None = None
) -> dict:
    """The episode line the in-process loop writes for `level` and `seed` (fast-forward, the
    heuristic, the configs in `configs` or the defaults, the pallet spec file `spec` if any),
    as it reads back from JSON."""
    from palletizer.core.config import load_config
    from palletizer.core.pallet_spec import read_spec
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    cfg = load_config(configs) if configs is not None else None
    pallet_spec = read_spec(spec) if spec is not None else None
    local, _ = run_inprocess(
        level,
        seed,
        build_planner('heuristic', cfg, pallet_spec=pallet_spec),
        speed=0.0,
        sink=MemorySink(),
        git_sha=git_sha,
        config=cfg,
        pallet_spec=pallet_spec,
    )
    return json.loads(json.dumps(local.to_dict()))
