"""Client for the planner-node graph test: asks the real planner node three questions."""

from __future__ import annotations

import json
import sys

import numpy as np
import rclpy
from palletizer.core.contracts import HeightMap, PackageSpec
from palletizer.core.measure import measure_placement, world_to_pallet
from palletizer.nodes.convert import heightmap_to_msg, placement_to_msg, plan_from_msg, spec_to_msg
from palletizer_msgs.srv import GetPalletSpec, PlanPlacement, SetPalletSpec
from std_srvs.srv import Trigger


def spec_questions(node, ask, std_m, empty, first_plan) -> dict:
    """Set and read the pallet spec: bad JSON and a bad key refused with their problems; a
    height limit in force at once on an empty record (no std_m fits under it), and one set
    while a stack is recorded waiting for the reset."""

    def call(srv, name, req):
        c = node.create_client(srv, f'/planner/{name}')
        assert c.wait_for_service(timeout_sec=30.0), name
        fut = c.call_async(req)
        rclpy.spin_until_future_complete(node, fut, timeout_sec=30.0)
        return fut.result()

    def set_(text):
        r = call(SetPalletSpec, 'set_pallet_spec', SetPalletSpec.Request(spec_json=text))
        return {'code': r.error_code, 'keys': list(r.problem_keys), 'problems': list(r.problems),
                'pending': r.pending, 'spec': r.spec_json, 'msg': r.error_msg}  # fmt: skip

    def get():
        r = call(GetPalletSpec, 'get_pallet_spec', GetPalletSpec.Request())
        return {'spec': r.spec_json, 'pending': r.pending}

    out = {
        'start': get(),
        'bad_json': set_('{max: 1'),
        'bad_key': set_('{"max_load_hieght_m": 1}'),
    }
    out['height'] = set_('{"max_load_height_m": 0.1}')
    out['after_height'] = get()
    if out['height']['code'] != 0:
        return out  # a planner that refuses hard rules: nothing more to ask
    low = ask(std_m, empty)
    out['plan_under_height'] = {'has_plan': low.has_plan, 'reasons': list(low.reject_reasons)}
    out['cleared'] = set_('')
    # A stack recorded (a plan request carrying a placement): a new spec waits for the reset.
    pose = world_to_pallet((*first_plan.position, first_plan.yaw))
    placed = measure_placement(0, std_m, first_plan.layer, pose, pose, [])
    req = PlanPlacement.Request(
        spec=spec_to_msg(std_m), heightmap=heightmap_to_msg(empty),
        placements=[placement_to_msg(placed)], placed_specs=[spec_to_msg(std_m)],
    )  # fmt: skip
    c = node.create_client(PlanPlacement, '/planner/plan')
    fut = c.call_async(req)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=30.0)
    out['during'] = set_('{"fragile": {}}')
    out['during_get'] = get()
    call(Trigger, 'reset', Trigger.Request())
    out['after_reset'] = get()
    return out


def main() -> int:
    rclpy.init()
    node = rclpy.create_node('plan_client')
    cli = node.create_client(PlanPlacement, '/planner/plan')
    assert cli.wait_for_service(timeout_sec=30.0), 'planner service never appeared'

    def ask(
        spec: PackageSpec, hm: HeightMap, excluded=(), last_resort=False
    ) -> PlanPlacement.Response:
        req = PlanPlacement.Request(
            spec=spec_to_msg(spec),
            heightmap=heightmap_to_msg(hm),
            excluded_slots=list(excluded),
            last_resort=last_resort,
        )
        fut = cli.call_async(req)
        rclpy.spin_until_future_complete(node, fut, timeout_sec=30.0)
        return fut.result()

    empty = HeightMap(np.zeros((80, 120)), None, (0.0, -0.4), 0.01)
    std_m = PackageSpec('std_m-00', 'std_m', (0.42, 0.30, 0.18), 4.2, (0.0, 0.0, 0.0))
    out = {}
    first = ask(std_m, empty)
    plan = plan_from_msg(first.plan)
    out['first'] = {
        'code': first.error_code,
        'slot': plan.slot,
        'x': plan.position[0],
        'y': plan.position[1],
        'terms': len(plan.breakdown),
    }
    second = ask(std_m, empty, excluded=[plan.slot])
    out['second_slot'] = plan_from_msg(second.plan).slot if second.has_plan else None
    huge = PackageSpec('huge', 'random', (2.0, 1.5, 0.2), 5.0, (0.0, 0.0, 0.0))
    none = ask(huge, empty)
    out['huge'] = {
        'code': none.error_code,
        'has_plan': none.has_plan,
        'reasons': list(none.reject_reasons),
    }
    # Ridges 0.2 m high, 0.1 m wide, 0.15 m apart: a std_m lid finds at most half its
    # footprint supported (configs/planner.yaml: min_support_ratio 0.60, last resort 0.50).
    cells = np.zeros((80, 120))
    for i in range(0, 120, 25):
        cells[:, i : i + 10] = 0.2
    ridges = HeightMap(cells, None, (0.0, -0.4), 0.01)
    out['ridges'] = {
        'usual': ask(std_m, ridges).has_plan,
        'last_resort': ask(std_m, ridges, last_resort=True).has_plan,
    }
    bad = PlanPlacement.Request(spec=spec_to_msg(std_m), heightmap=heightmap_to_msg(empty))
    bad.heightmap.nx = 7
    fut = cli.call_async(bad)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=30.0)
    out['bad'] = {'code': fut.result().error_code, 'msg': fut.result().error_msg}
    out['spec'] = spec_questions(node, ask, std_m, empty, plan)
    print('PLAN ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
