"""`preview_placement`: where a planner would put one carton, asked in-process; nothing moves.

The planner is built by core.planning.build_planner, as the planner node builds it, and told
the stack the way the episode loop tells it: each measured placement recorded, and the height
map the cartons' tops make (core.fusion.stamp_heightmap, the oracle map's maths). The stack is
the last run's, read from its placements.jsonl, or an empty pallet.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from palletizer.cli.mcp_models import PreviewResult
from palletizer.core.contracts import PackageSpec, PalletGeometry, Placement
from palletizer.core.errors import InvalidValue
from palletizer.core.fusion import stamp_heightmap
from palletizer.core.measure import pallet_state, pallet_to_world, world_to_pallet
from palletizer.core.pallet_spec import PalletSpec
from palletizer.core.planning import PlannerKind, build_planner

__all__ = ['DIM_MAX_M', 'jsonl_rows', 'preview', 'read_stack']

DIM_MAX_M = 1.2  # [m] no side longer than the EUR pallet's length
PREVIEW_ID = 'preview'


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSONL file (a line still being written is skipped)."""
    try:
        text = path.read_text(encoding='utf-8')
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def _pose(p: Mapping[str, float]) -> tuple[float, float, float, float]:
    return (float(p['x']), float(p['y']), float(p['z']), float(p['yaw']))


def read_stack(run_dir: Path, seed: int | None = None) -> list[Placement]:
    """The placements of one episode of a run folder (its last one when `seed` is None), as
    telemetry wrote them (placements.jsonl, SI columns, pallet frame)."""
    rows = jsonl_rows(run_dir / 'placements.jsonl')
    if not rows:
        return []
    want = rows[-1]['seed'] if seed is None else seed
    return [
        Placement(
            seq=r['seq'],
            package_id=r['package_id'],
            package_type=r['package_type'],
            mass_kg=r['mass_kg'],
            dims_m=tuple(r['dims_m']),
            layer=r['layer'],
            planned_pose=_pose(r['planned_pose']),
            actual_pose=_pose(r['actual_pose']),
            error_xy_m=r['error_xy_m'],
            error_yaw_rad=r['error_yaw_rad'],
            support_ratio=r['support_ratio'],
            overhang_m=r['overhang_m'],
            placed=r['placed'],
            support_ratio_layer=r.get('support_ratio_layer'),
        )
        for r in rows
        if r.get('seed') == want
    ]


def _box(p: Placement, pallet: PalletGeometry) -> tuple[str, Any, Any, Any]:
    x, y, z, yaw = pallet_to_world(p.actual_pose, pallet)
    quat = (math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0))
    return (p.package_id, (x, y, z), quat, p.dims_m)


def preview(
    dims_m: Sequence[float],
    mass_kg: float,
    stack: Sequence[Placement],
    stack_label: str,
    planner: PlannerKind,
    spec: PalletSpec | None,
    config: Any,
) -> PreviewResult:
    """Ask `planner` where a carton of `dims_m` (L, W, H) [m] and `mass_kg` [kg] goes on
    `stack`; the score terms and the stack's tipping margin with and without it."""
    payload = config.cell.robot.payload_kg - config.cell.gripper.mass_kg
    bad = [d for d in dims_m if not 0.0 < d <= DIM_MAX_M]
    if len(dims_m) != 3 or bad:
        raise InvalidValue(
            f'dims_m = {list(dims_m)}; expected three sizes L, W, H, each > 0 and <= {DIM_MAX_M} m'
        )
    if not 0.0 < mass_kg <= payload:
        raise InvalidValue(
            f'mass_kg = {mass_kg}; expected > 0 and <= {payload:.2f} kg (the UR10e payload '
            'less the gripper)'
        )
    pallet = PalletGeometry.from_config(config.cell.pallet)
    plan_spec = None if spec is None or spec.empty else spec
    chooser = build_planner(planner, config, pallet=pallet, pallet_spec=plan_spec)
    for p in stack:
        chooser.record(p)
    heightmap = stamp_heightmap([_box(p, pallet) for p in stack], None, pallet)
    after = max((p.seq for p in stack), default=0)
    before = pallet_state(after, stack, pallet=pallet) if stack else None
    carton = PackageSpec(PREVIEW_ID, PREVIEW_ID, tuple(dims_m), mass_kg)  # type: ignore[arg-type]  # checked: three sizes
    result = chooser.choose(carton, heightmap, before)
    common: dict[str, Any] = {
        'planner': planner.value,
        'stack': stack_label,
        'stack_cartons': len(stack),
        'stability_margin_before_m': None if before is None else before.stability_margin_m,
        'pallet_spec': plan_spec is not None,
    }
    plan = result.plan
    if plan is None:
        return PreviewResult(
            found=False,
            position_m=None,
            yaw_rad=None,
            layer=None,
            slot=None,
            score=None,
            score_terms={},
            predicted_support=None,
            stability_margin_m=None,
            rejects=dict(result.reject_summary),
            **common,
        )
    pose = world_to_pallet((*plan.position, plan.yaw), pallet)
    placed = Placement(
        seq=after + 1,
        package_id=PREVIEW_ID,
        package_type=PREVIEW_ID,
        mass_kg=mass_kg,
        dims_m=carton.dims_m,
        layer=plan.layer,
        planned_pose=pose,
        actual_pose=pose,
        error_xy_m=0.0,
        error_yaw_rad=0.0,
        support_ratio=plan.predicted_support,
        overhang_m=0.0,
        placed=True,
    )
    with_it = pallet_state(after + 1, [*stack, placed], pallet=pallet)
    return PreviewResult(
        found=True,
        position_m=(pose[0], pose[1], pose[2]),
        yaw_rad=pose[3],
        layer=plan.layer,
        slot=plan.slot,
        score=plan.score,
        score_terms=dict(plan.breakdown),
        predicted_support=plan.predicted_support,
        stability_margin_m=with_it.stability_margin_m,
        rejects={},
        **common,
    )
