"""Calls the cell_bridge node's handlers in process: capture, settle, stability, determinism."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import rclpy
from palletizer.nodes.cell_bridge import CellBridgeNode
from palletizer_msgs.srv import Capture, PresentCarton, ResetCell, RunStability, Settle


def main() -> int:
    rclpy.init(args=['--ros-args', '-p', 'level:=11', '-p', 'speed:=1.0'])
    node = CellBridgeNode()
    frames: dict[str, object] = {}
    for name, (dep, col, info) in node.images.pubs.items():
        for kind, pub in (('depth', dep), ('color', col), ('info', info)):
            node.create_subscription(
                pub.msg_type,
                pub.topic_name,
                lambda m, k=(name, kind): frames.__setitem__(k, m),
                10,
            )
    out: dict[str, object] = {}
    t0 = time.perf_counter()
    cap = node.lockstep.on_capture(Capture.Request(cameras=['top', 'station']), Capture.Response())
    out['capture_s'] = round(time.perf_counter() - t0, 3)
    bad = node.lockstep.on_capture(Capture.Request(cameras=['roof']), Capture.Response())
    end = time.monotonic() + 5.0
    while len(frames) < 6 and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    depth = frames[('top', 'depth')]
    img = np.frombuffer(bytes(depth.data), np.float32).reshape(depth.height, depth.width)
    out['capture'] = {
        'code': cap.error_code,
        'got': sorted(f'{a}/{b}' for a, b in frames),
        'depth_centre_m': float(img[depth.height // 2, depth.width // 2]),
        'frame_id': depth.header.frame_id,
        'encoding': [depth.encoding, frames[('top', 'color')].encoding],
        'k0': float(frames[('top', 'info')].k[0]),
        'bad': [bad.error_code, bad.error_msg],
    }
    digests = []
    for _ in range(2):
        node.lockstep.on_reset(ResetCell.Request(level=11, seed=3), ResetCell.Response())
        pres = node.lockstep.on_present(PresentCarton.Request(), PresentCarton.Response())
        st = node.lockstep.on_settle(Settle.Request(duration=0.2), Settle.Response())
        digests.append(node.cell.state_digest().hex())
    out['settle'] = {'code': st.error_code, 'max_speed': st.max_speed, 'id': pres.package_id}
    out['deterministic'] = digests[0] == digests[1]
    neg = node.lockstep.on_settle(Settle.Request(duration=-1.0), Settle.Response())
    out['settle_neg'] = [neg.error_code, neg.error_msg]
    none = node.lockstep.on_stability(RunStability.Request(), RunStability.Response())
    out['stability_none'] = [none.error_code, none.error_msg]
    t0 = time.perf_counter()
    stab = node.lockstep.on_stability(
        RunStability.Request(jolts=False, beam=False, eumos=True), RunStability.Response()
    )
    out['stability'] = {
        'code': stab.error_code,
        'msg': stab.error_msg,
        'held_all': stab.held_all,
        'trials': len(json.loads(stab.detail_json or '[]')),
        'wall_s': round(time.perf_counter() - t0, 2),
    }
    print('SERVICES ' + json.dumps(out), flush=True)
    node.cell.close()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
