"""Planner node: the plan service over the ROS-free placement planners."""

from __future__ import annotations

import sys

from palletizer_msgs.srv import GetPalletSpec, PlanPlacement, SetPalletSpec
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from palletizer.core.config import load_config
from palletizer.core.errors import PalletizerError
from palletizer.core.pallet_spec import SpecError, read_spec
from palletizer.core.planning import Planner, RecordedPlanner, build_planner
from palletizer.nodes.convert import (
    heightmap_from_msg,
    pallet_state_from_msg,
    placement_from_msg,
    plan_to_msg,
    reject_to_lists,
    spec_from_msg,
)
from palletizer.nodes.params import declare
from palletizer.nodes.plan_markers import PlanMarkers
from palletizer.nodes.planner_spec import PlannerSpec, parse_spec_json, spec_json
from palletizer.nodes.qos import MARKERS
from palletizer.nodes.spin import run_node

__all__ = ['PlannerNode', 'main']


class PlannerNode(Node):
    """Serves ~/plan. Each request carries the episode's placements so far: the node records
    what it has not yet, so a plan asked again of a restarted planner gets the same answer."""

    def __init__(self) -> None:
        super().__init__('planner')
        kind = declare(self, 'kind', 'heuristic', 'placement planner: heuristic | beam | grid')
        weights = str(
            declare(
                self,
                'weights_file',
                '',
                'heuristic weights file (planner_weights:=; e.g. scripts/train '
                'best_weights.json); empty = configs/planner.yaml',
            )
        )
        spec_file = str(
            declare(
                self,
                'pallet_spec',
                '',
                'pallet spec file (pallet_spec:=); the heuristic keeps its hard rules',
            )
        )
        self.kind = kind
        self.weights = weights or None
        self.types = load_config().catalogue.types
        self.spec = PlannerSpec(read_spec(spec_file, types=self.types) if spec_file else None)

        def fresh() -> Planner:
            return build_planner(kind, weights_file=self.weights, pallet_spec=self.spec.now)

        fresh()  # a bad weights file or spec fails at start
        self.record = RecordedPlanner(fresh)
        self.markers = PlanMarkers()
        self.markers_pub = self.create_publisher(MarkerArray, '/palletizer/plan_markers', MARKERS)
        self.create_service(PlanPlacement, '~/plan', self.on_plan)
        self.create_service(Trigger, '~/reset', self.on_reset)
        self.create_service(SetPalletSpec, '~/set_pallet_spec', self.on_set_spec)
        self.create_service(GetPalletSpec, '~/get_pallet_spec', self.on_get_spec)
        self.add_on_set_parameters_callback(self.on_set_parameters)
        self.get_logger().info(
            f'planner ready: {kind}{f" weights {weights}" if weights else ""} '
            f'(oracle={self.record.planner.oracle})'
        )

    def on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            if p.name in ('kind', 'weights_file', 'pallet_spec'):
                return SetParametersResult(
                    successful=False,
                    reason=f'{p.name} is fixed at start; restart the node to change it',
                )
        return SetParametersResult(successful=True)

    def on_reset(self, req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        """Forget the recorded stack: a new episode starts on an empty pallet (with the spec
        set since the last episode began, if any)."""
        self.spec.apply_pending()
        self.record.reset()
        res.success, res.message = True, f'{self.kind} planner reset'
        return res

    def on_set_spec(
        self, req: SetPalletSpec.Request, res: SetPalletSpec.Response
    ) -> SetPalletSpec.Response:
        """A new spec: now when no stack is recorded, else from the next episode."""
        R = SetPalletSpec.Response
        try:
            spec = parse_spec_json(req.spec_json, self.types)
        except SpecError as exc:
            res.error_code, res.error_msg = R.INVALID_SPEC, str(exc)
            res.problem_keys = [p.key for p in exc.problems]
            res.problems = [str(p) for p in exc.problems]
            return res
        try:
            build_planner(self.kind, weights_file=self.weights, pallet_spec=spec)
        except PalletizerError as exc:
            res.error_code, res.error_msg = R.PLANNER_REFUSES, str(exc)
            return res
        res.pending = bool(self.record.recorded)
        self.spec.set(spec, now=not res.pending)
        if not res.pending:
            self.record.reset()
        res.spec_json = spec_json(spec)
        res.error_code = R.OK
        self.get_logger().info(
            f'pallet spec set{" for the next episode" if res.pending else ""}: '
            f'{res.spec_json or "none"}'
        )
        return res

    def on_get_spec(
        self, req: GetPalletSpec.Request, res: GetPalletSpec.Response
    ) -> GetPalletSpec.Response:
        res.spec_json = spec_json(self.spec.now)
        res.pending = self.spec.has_pending
        res.error_code = GetPalletSpec.Response.OK
        return res

    def on_plan(
        self, req: PlanPlacement.Request, res: PlanPlacement.Response
    ) -> PlanPlacement.Response:
        try:
            spec = spec_from_msg(req.spec)
            heightmap = heightmap_from_msg(req.heightmap)
            placements = [placement_from_msg(p) for p in req.placements]
            specs = [spec_from_msg(s) for s in req.placed_specs]
        except (PalletizerError, ValueError) as exc:
            res.error_code = PlanPlacement.Response.INVALID_REQUEST
            res.error_msg = str(exc)
            return res
        pallet = pallet_state_from_msg(req.pallet) if req.has_pallet else None
        self.record.sync(placements, specs)
        planner = self.record.planner
        result = planner.choose(
            spec, heightmap, pallet, tuple(req.excluded_slots), last_resort=req.last_resort
        )
        try:  # what RViz shows must never cost the plan
            stamp = self.get_clock().now().to_msg()
            self.markers_pub.publish(
                self.markers.array(stamp, spec, result.plan, planner, heightmap, pallet)
            )
        except Exception as exc:  # noqa: BLE001
            self.get_logger().warning(f'plan markers not published: {exc!r}')
        res.reject_reasons, res.reject_counts = reject_to_lists(result.reject_summary)
        if result.plan is None:
            res.error_code = PlanPlacement.Response.NO_CANDIDATE
            res.error_msg = (
                'no candidate exists for this carton'
                if not result.reject_summary
                else 'every candidate was rejected: see reject_reasons'
            )
            return res
        res.has_plan = True
        res.plan = plan_to_msg(result.plan)
        res.error_code = PlanPlacement.Response.OK
        return res


def main(args: list[str] | None = None) -> None:
    try:
        run_node(PlannerNode, args)
    except PalletizerError as exc:
        # A missing reach table or a bad config cannot be fixed by a respawn: one line, exit 2.
        print(f'planner: error: {exc}', file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    main()
