"""Client for the planner-node graph test: asks the real planner node three questions."""

from __future__ import annotations

import json
import sys

import numpy as np
import rclpy
from palletizer.core.contracts import HeightMap, PackageSpec
from palletizer.nodes.convert import heightmap_to_msg, plan_from_msg, spec_to_msg
from palletizer_msgs.srv import PlanPlacement


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
    print('PLAN ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
