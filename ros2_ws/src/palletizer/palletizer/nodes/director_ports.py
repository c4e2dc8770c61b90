"""The episode ports wired to ROS services and actions (the director's side of the graph).

Each port turns one core call into a service or action call and back, over the Calls helper
(nodes/calls.py): a node that does not answer within its timeout aborts the episode with a
reason naming it (EpisodeAborted), so an open episode is always closed. Here: the cell, the
planner and the referee; the executor is in director_motion.py, the sink in director_sink.py,
the gauge and the perception in sensing_ports.py, a real cell's line in line_ports.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from builtin_interfaces.msg import Time
from palletizer_msgs.srv import (
    GetPalletSpec,
    GroundTruth,
    PlanPlacement,
    PresentCarton,
    ReleaseCarton,
    ResetCell,
    RunStability,
    Settle,
)
from rclpy.node import Node
from std_srvs.srv import Trigger

from palletizer.core.contracts import (
    HeightMap,
    PackageSpec,
    PalletState,
    Placement,
    PlanResult,
    floats3,
)
from palletizer.core.errors import UnknownKey
from palletizer.core.fusion import yaw_of_quat
from palletizer.core.pallet_spec import PalletSpec
from palletizer.core.planning import PlannerKind
from palletizer.core.ports import EpisodeAborted, Presented
from palletizer.nodes.calls import Calls
from palletizer.nodes.convert import (
    heightmap_to_msg,
    pallet_state_to_msg,
    placement_to_msg,
    plan_from_msg,
    reject_from_lists,
    spec_to_msg,
    stamp_s,
)
from palletizer.nodes.planner_spec import parse_spec_json
from palletizer.nodes.sensing_ports import RosGauge

__all__ = ['RosCell', 'RosPlanner', 'RosReferee']


class RosCell:
    """CellPort over the cell bridge's services; tares the wrist gauge after each reset."""

    def __init__(
        self, node: Node, calls: Calls, gauge: RosGauge, prefix: str = '/cell_bridge'
    ) -> None:
        self.calls = calls
        self.gauge = gauge
        self.reset_c = node.create_client(ResetCell, f'{prefix}/reset')
        self.present_c = node.create_client(PresentCarton, f'{prefix}/present')
        self.release_c = node.create_client(ReleaseCarton, f'{prefix}/release')
        self.settle_c = node.create_client(Settle, f'{prefix}/settle')
        self._t0 = 0.0
        self._now = 0.0
        self.stamp = Time()
        self.source = ''

    def _at(self, stamp: Time) -> None:
        if stamp_s(stamp) >= self._now:
            self._now = stamp_s(stamp)
            self.stamp = stamp

    def reset(self, level: int, seed: int) -> int:
        res = self.calls.service(
            self.reset_c,
            ResetCell.Request(level=level, seed=seed),
            'cell reset',
            self.calls.t.reset_s,
        )
        if res.error_code != ResetCell.Response.OK:
            raise EpisodeAborted(f'cell reset failed: {res.error_msg}')
        self._now = stamp_s(res.stamp)
        self.stamp = res.stamp
        self._t0 = self._now
        self.source = res.source
        self.hold(self.gauge.hold_s)
        self.gauge.tare()
        return int(res.n_cartons)

    def present(self) -> Presented:
        res = self.calls.service(
            self.present_c, PresentCarton.Request(), 'cell present', self.calls.t.present
        )
        self._at(res.stamp)
        st = res.state
        extras = json.loads(st.extras_json) if st.extras_json else {}
        pid = (
            res.package_id
            if res.error_code == PresentCarton.Response.OK and res.package_id
            else None
        )
        return Presented(
            pid, int(st.pending), bool(st.exhausted), bool(st.jammed), extras, tuple(res.forecast)
        )

    def release(self, package_id: str) -> None:
        res = self.calls.service(
            self.release_c,
            ReleaseCarton.Request(package_id=package_id),
            'cell release',
            self.calls.t.quick_s,
        )
        self._at(res.stamp)

    def settle(self, seconds: float) -> None:
        self.hold(seconds)

    def hold(self, seconds: float) -> None:
        res = self.calls.service(
            self.settle_c,
            Settle.Request(duration=float(seconds)),
            'cell settle',
            self.calls.t.scaled(seconds),
        )
        self._at(res.stamp)
        if res.error_code != Settle.Response.OK:  # INVALID_REQUEST: the world did not advance
            raise EpisodeAborted(f'cell settle of {seconds:g} s refused: {res.error_msg}')

    def sim_time(self) -> float:
        return self._now - self._t0


class RosPlanner:
    """Planner protocol over the planner node; each plan request carries the stack so far."""

    oracle = False

    def __init__(self, node: Node, calls: Calls, kind: str, prefix: str = '/planner') -> None:
        self.calls = calls
        self.kind = PlannerKind(kind)
        self.plan_c = node.create_client(PlanPlacement, f'{prefix}/plan')
        self.reset_c = node.create_client(Trigger, f'{prefix}/reset')
        self.spec_c = node.create_client(GetPalletSpec, f'{prefix}/get_pallet_spec')
        # The episode's placements and the specs weighed for them: every plan request carries
        # them, so it can be asked again of a restarted planner.
        self.placements: list[Placement] = []
        self.specs: dict[str, PackageSpec] = {}

    def reset(self) -> None:
        self.placements, self.specs = [], {}
        self.calls.service(
            self.reset_c, Trigger.Request(), 'planner reset', self.calls.t.quick_s, repeatable=True
        )

    def pallet_spec(self, types: Iterable[str]) -> PalletSpec | None:
        """The pallet spec the planner plans to now (after a reset: this episode's)."""
        res = self.calls.service(
            self.spec_c,
            GetPalletSpec.Request(),
            'planner pallet spec',
            self.calls.t.quick_s,
            repeatable=True,
        )
        return parse_spec_json(res.spec_json, types)

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
        last_resort: bool = False,
    ) -> PlanResult:
        req = PlanPlacement.Request(
            spec=spec_to_msg(spec),
            heightmap=heightmap_to_msg(heightmap),
            has_pallet=pallet is not None,
            excluded_slots=list(excluded_slots),
            last_resort=last_resort,
            placements=[placement_to_msg(p) for p in self.placements],
            placed_specs=[spec_to_msg(s) for s in self.specs.values()],
        )
        self.specs[spec.package_id] = spec
        if pallet is not None:
            req.pallet = pallet_state_to_msg(pallet)
        # Repeatable: the request carries the stack, so a restarted planner answers the same.
        res = self.calls.service(self.plan_c, req, 'planner', self.calls.t.plan_s, repeatable=True)
        if res.error_code == PlanPlacement.Response.INVALID_REQUEST:
            raise EpisodeAborted(f'planner refused the request: {res.error_msg}')
        summary = reject_from_lists(res.reject_reasons, res.reject_counts)
        return PlanResult(plan_from_msg(res.plan) if res.has_plan else None, summary)

    def record(self, placement: Placement) -> None:
        """The next plan request carries it to the planner node."""
        self.placements.append(placement)

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None:
        """No forecast over ROS in this version: only an oracle gauge could weigh ahead."""


class RosReferee:
    """RefereePort over the cell's ground-truth service (scoring only), and the physical
    stability trials on the finished stack (the cell restores the stack afterwards)."""

    def __init__(self, node: Node, calls: Calls, prefix: str = '/cell_bridge') -> None:
        self.calls = calls
        self.truth_c = node.create_client(GroundTruth, f'{prefix}/ground_truth')
        self.stability_c = node.create_client(RunStability, f'{prefix}/run_stability')

    def stability(self) -> dict[str, Any]:
        """The trials' summary (held_all, per-axis held g, scores, beams, EUMOS); raises
        EpisodeAborted when the cell refuses."""
        res = self.calls.service(
            self.stability_c,
            RunStability.Request(jolts=True, beam=True, eumos=True),
            'cell stability trials',
            self.calls.t.scaled(self.calls.t.stability_s),
        )
        if res.error_code != RunStability.Response.OK:
            raise EpisodeAborted(f'cell stability trials: {res.error_msg}')
        return dict(json.loads(res.summary_json or '{}'))

    def _truth(self, package_ids: Sequence[str]) -> dict[str, Any]:
        """The ground truth's CartonTruth of each carton; UnknownKey for one it lacks."""
        res = self.calls.service(
            self.truth_c,
            GroundTruth.Request(),
            'referee',
            self.calls.t.quick_s,
            repeatable=True,
            retry_s=10.0,
        )
        by_id = {c.package_id: c for c in res.cartons}
        for pid in package_ids:
            if pid not in by_id:
                ids = ', '.join(sorted(by_id)) or '(none)'
                raise UnknownKey(
                    f'referee: package_id {pid!r} is not in the ground truth; it has {ids}'
                )
        return {pid: by_id[pid] for pid in package_ids}

    def poses(self, package_ids: Sequence[str]) -> Mapping[str, tuple[float, float, float, float]]:
        out = {}
        for pid, c in self._truth(package_ids).items():
            p, o = c.pose.position, c.pose.orientation
            out[pid] = (p.x, p.y, p.z, yaw_of_quat((o.w, o.x, o.y, o.z)))
        return out

    def cog_offsets(self, package_ids: Sequence[str]) -> Mapping[str, tuple[float, float, float]]:
        """True CoG offset [m] of each carton in its body frame (the frame of `poses`' yaw)."""
        return {pid: floats3(c.cog_offset_m) for pid, c in self._truth(package_ids).items()}

    def masses(self, package_ids: Sequence[str]) -> Mapping[str, float]:
        """True mass [kg] of each carton."""
        return {pid: float(c.mass_kg) for pid, c in self._truth(package_ids).items()}
