"""Lossless conversion between the core contracts and palletizer_msgs (both ways)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from palletizer_msgs.msg import EpisodeResult as EpisodeResultMsg
from palletizer_msgs.msg import HeightMap as HeightMapMsg
from palletizer_msgs.msg import Observation as ObservationMsg
from palletizer_msgs.msg import PackageSpec as PackageSpecMsg
from palletizer_msgs.msg import PalletState as PalletStateMsg
from palletizer_msgs.msg import Placement as PlacementMsg
from palletizer_msgs.msg import PlacementPlan as PlacementPlanMsg
from palletizer_msgs.msg import Pose4

from palletizer.core.contracts import (
    EpisodeResult,
    FailureCause,
    HeightMap,
    LidRect,
    Observation,
    PackageSpec,
    PalletState,
    Placement,
    PlacementPlan,
    floats3,
)

__all__ = [
    'stamp_s',
    'episode_result_from_msg',
    'episode_result_to_msg',
    'heightmap_from_msg',
    'heightmap_to_msg',
    'observation_from_msg',
    'observation_to_msg',
    'pallet_state_from_msg',
    'pallet_state_to_msg',
    'placement_from_msg',
    'placement_to_msg',
    'plan_from_msg',
    'plan_to_msg',
    'reject_from_lists',
    'reject_to_lists',
    'spec_from_msg',
    'spec_to_msg',
]


def stamp_s(t: Time) -> float:
    """A message stamp (builtin_interfaces/Time) in seconds."""
    return float(t.sec + t.nanosec * 1e-9)


def _point(p: Sequence[float]) -> Point:
    return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))


def _xyz(p: Point) -> tuple[float, float, float]:
    return (p.x, p.y, p.z)


def observation_to_msg(o: Observation) -> ObservationMsg:
    return ObservationMsg(
        package_id=o.package_id,
        position=_point(o.position),
        yaw=float(o.yaw),
        dims_guess=[float(x) for x in o.dims_guess],
        confidence=float(o.confidence),
    )


def observation_from_msg(m: ObservationMsg) -> Observation:
    return Observation(m.package_id, _xyz(m.position), m.yaw, tuple(m.dims_guess), m.confidence)


def spec_to_msg(s: PackageSpec) -> PackageSpecMsg:
    return PackageSpecMsg(
        package_id=s.package_id,
        type_name=s.type_name,
        dims_m=[float(x) for x in s.dims_m],
        mass_kg=float(s.mass_kg),
        cog_offset_m=[float(x) for x in s.cog_offset_m],
        label_face=s.label_face,
    )


def spec_from_msg(m: PackageSpecMsg) -> PackageSpec:
    return PackageSpec(
        m.package_id,
        m.type_name,
        floats3(m.dims_m),
        m.mass_kg,
        floats3(m.cog_offset_m),
        m.label_face,
    )


def heightmap_to_msg(h: HeightMap, frame_id: str = 'world') -> HeightMapMsg:
    ny, nx = h.shape
    m = HeightMapMsg(
        ny=ny,
        nx=nx,
        origin_x=float(h.origin[0]),
        origin_y=float(h.origin[1]),
        cell_size=float(h.cell_size),
    )
    m.header.frame_id = frame_id
    m.cells = np.ascontiguousarray(h.cells, dtype=np.float64).ravel()
    m.observed = [bool(b) for b in np.asarray(h.observed).ravel()]
    m.lids = [float(v) for r in h.lids for v in r]
    return m


def heightmap_from_msg(m: HeightMapMsg) -> HeightMap:
    n = m.ny * m.nx
    if len(m.cells) != n or len(m.observed) != n:
        from palletizer.core.errors import PalletizerError

        raise PalletizerError(
            f'HeightMap message has {len(m.cells)} cells and {len(m.observed)} observed flags; '
            f'expected ny * nx = {m.ny} * {m.nx} = {n} of each'
        )
    if len(m.lids) % 6:
        from palletizer.core.errors import PalletizerError

        raise PalletizerError(
            f'HeightMap message has {len(m.lids)} lid values; expected 6 per lid '
            '(x, y, yaw, length, width, height)'
        )
    cells = np.asarray(m.cells, dtype=np.float64).reshape(m.ny, m.nx)
    observed = np.asarray(m.observed, dtype=bool).reshape(m.ny, m.nx)
    v = [float(x) for x in m.lids]
    lids = tuple(LidRect(*v[i : i + 6]) for i in range(0, len(v), 6))
    return HeightMap(cells, observed, (m.origin_x, m.origin_y), m.cell_size, lids)


def plan_to_msg(p: PlacementPlan) -> PlacementPlanMsg:
    names = list(p.breakdown)
    return PlacementPlanMsg(
        position=_point(p.position),
        yaw=float(p.yaw),
        layer=int(p.layer),
        slot=p.slot,
        score=float(p.score),
        predicted_support=float(p.predicted_support),
        breakdown_names=names,
        breakdown_values=[float(p.breakdown[n]) for n in names],
    )


def plan_from_msg(m: PlacementPlanMsg) -> PlacementPlan:
    return PlacementPlan(
        _xyz(m.position),
        m.yaw,
        m.layer,
        m.slot,
        m.score,
        m.predicted_support,
        dict(zip(m.breakdown_names, m.breakdown_values, strict=True)),
    )


def _pose4(p: Sequence[float]) -> Pose4:
    return Pose4(x=float(p[0]), y=float(p[1]), z=float(p[2]), yaw=float(p[3]))


def placement_to_msg(p: Placement) -> PlacementMsg:
    return PlacementMsg(
        seq=int(p.seq),
        package_id=p.package_id,
        package_type=p.package_type,
        mass_kg=float(p.mass_kg),
        dims_m=[float(x) for x in p.dims_m],
        layer=int(p.layer),
        planned_pose=_pose4(p.planned_pose),
        actual_pose=_pose4(p.actual_pose),
        error_xy_m=float(p.error_xy_m),
        error_yaw_rad=float(p.error_yaw_rad),
        support_ratio=float(p.support_ratio),
        support_ratio_layer=(
            math.nan if p.support_ratio_layer is None else float(p.support_ratio_layer)
        ),
        overhang_m=float(p.overhang_m),
        placed=bool(p.placed),
    )


def placement_from_msg(m: PlacementMsg) -> Placement:
    def pose(q: Pose4) -> tuple[float, float, float, float]:
        return (q.x, q.y, q.z, q.yaw)

    return Placement(
        m.seq,
        m.package_id,
        m.package_type,
        m.mass_kg,
        tuple(m.dims_m),
        m.layer,
        pose(m.planned_pose),
        pose(m.actual_pose),
        m.error_xy_m,
        m.error_yaw_rad,
        m.support_ratio,
        m.overhang_m,
        m.placed,
        None if math.isnan(m.support_ratio_layer) else m.support_ratio_layer,
    )


def pallet_state_to_msg(s: PalletState) -> PalletStateMsg:
    return PalletStateMsg(
        after_seq=int(s.after_seq),
        mass_kg=float(s.mass_kg),
        cog=_point(s.cog),
        stability_margin_m=float(s.stability_margin_m),
        fill_ratio=float(s.fill_ratio),
        settle_drift_m=float(s.settle_drift_m),
        layer_flatness=float(s.layer_flatness),
    )


def pallet_state_from_msg(m: PalletStateMsg) -> PalletState:
    return PalletState(
        m.after_seq,
        m.mass_kg,
        _xyz(m.cog),
        m.stability_margin_m,
        m.fill_ratio,
        m.settle_drift_m,
        m.layer_flatness,
    )


def reject_to_lists(summary: Mapping[str, int]) -> tuple[list[str], list[int]]:
    names = sorted(summary)
    return names, [int(summary[n]) for n in names]


def reject_from_lists(names: Iterable[str], counts: Iterable[int]) -> dict[str, int]:
    return {str(n): int(c) for n, c in zip(names, counts, strict=True)}


def episode_result_to_msg(r: EpisodeResult) -> EpisodeResultMsg:
    return EpisodeResultMsg(
        seed=int(r.seed),
        level=int(r.level),
        n_objects=int(r.n_objects),
        n_placed=int(r.n_placed),
        n_misrouted=int(r.n_misrouted),
        success=bool(r.success),
        duration_s=float(r.duration_s),
        failure=r.failure.value if r.failure is not None else '',
        oracle=bool(r.oracle),
        git_sha=r.git_sha,
        task=r.task,
        metrics_json=json.dumps(dict(r.metrics), sort_keys=True),
    )


def episode_result_from_msg(m: EpisodeResultMsg) -> EpisodeResult:
    return EpisodeResult(
        seed=m.seed,
        level=m.level,
        n_objects=m.n_objects,
        n_placed=m.n_placed,
        n_misrouted=m.n_misrouted,
        success=m.success,
        duration_s=m.duration_s,
        failure=FailureCause(m.failure) if m.failure else None,
        oracle=m.oracle,
        git_sha=m.git_sha,
        task=m.task,
        metrics=json.loads(m.metrics_json or '{}'),
    )
