"""Client for the hardware-profile graph test: a world that runs on its own, 500 Hz joint states,
streaming 16UC1 cameras under the names given by parameter, the line's handshake on I/O, and
the simulated cell's own services refused by name and counted. Prints HARDWARE {json}."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import rclpy
from palletizer.core.config import load_config
from palletizer.launcher.graph import UR_SET_IO_SERVICE
from palletizer.nodes.qos import LATCHED
from palletizer_msgs.srv import GroundTruth, ResetCell
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import UInt32
from ur_msgs.msg import IOStates
from ur_msgs.srv import SetIO

# The names the test's params file gives the cameras (a camera driver's, remapped).
DEPTH = '/cam/{camera}/aligned_depth_to_color/image_raw'
INFO = '/cam/{camera}/color/camera_info'


def main() -> int:
    rclpy.init()
    node = rclpy.create_node('hardware_client')
    got: dict[str, list] = {}

    def keep(key):
        return lambda m: got.setdefault(key, []).append(m)

    depth = QoSProfile(depth=1000)
    node.create_subscription(Clock, '/clock', keep('clock'), depth)
    node.create_subscription(JointState, '/joint_states', keep('js'), depth)
    node.create_subscription(IOStates, '/io_and_status_controller/io_states', keep('io'), depth)
    node.create_subscription(Image, DEPTH.format(camera='top'), keep('depth'), QoSProfile(depth=5))
    node.create_subscription(CameraInfo, INFO.format(camera='top'), keep('info'), depth)
    node.create_subscription(Image, '/cameras/top/depth/image_raw', keep('old_depth'), depth)
    node.create_subscription(UInt32, '/cell_bridge/sim_only_calls', keep('count'), LATCHED)
    set_io = node.create_client(SetIO, UR_SET_IO_SERVICE)
    reset = node.create_client(ResetCell, '/cell_bridge/reset')
    truth = node.create_client(GroundTruth, '/cell_bridge/ground_truth')
    for c in (set_io, reset, truth):
        assert c.wait_for_service(timeout_sec=30.0), f'{c.srv_name} never appeared'

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)

    def spin_until(cond, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if cond():
                return True
            rclpy.spin_once(node, timeout_sec=0.05)
        return cond()

    def call(client, req):
        fut = client.call_async(req)
        rclpy.spin_until_future_complete(node, fut, timeout_sec=30.0)
        assert fut.done(), f'{client.srv_name}: no answer'
        return fut.result()

    def sim_now() -> float:
        c = got['clock'][-1].clock
        return c.sec + c.nanosec * 1e-9

    line = load_config().cell.hardware.line

    def digital_in(pin: int) -> bool:
        return bool(got['io'][-1].digital_in_states[pin].state) if got.get('io') else False

    out: dict = {}
    # Nobody calls anything: the world runs on.
    assert spin_until(lambda: got.get('clock') and got.get('depth'), 30.0), 'no clock or frames'
    t0, w0 = sim_now(), time.monotonic()
    spin(3.0)
    out['sim_s'], out['wall_s'] = sim_now() - t0, time.monotonic() - w0
    js = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in got['js'][-200:]]
    out['js_dt_median'] = float(np.median(np.diff(js)))
    img = got['depth'][-1]
    mm = np.frombuffer(bytes(img.data), dtype=np.uint16).reshape(img.height, img.width)
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in got['depth']]
    out['depth'] = {
        'encoding': img.encoding,
        'frame_id': img.header.frame_id,
        'step': img.step,
        'width': img.width,
        'median_mm': float(np.median(mm[mm > 0])),
        'frame_dt': float(np.median(np.diff(stamps))) if len(stamps) > 1 else None,
        'info_frame_id': got['info'][-1].header.frame_id if got.get('info') else None,
    }
    out['old_depth'] = len(got.get('old_depth', []))
    # The line: nothing at the station until asked; the photo-eye rises once one has come.
    out['arrived_before'] = digital_in(line.arrived_in)
    spin(1.0)
    out['arrived_unasked'] = digital_in(line.arrived_in)
    ok = call(set_io, SetIO.Request(fun=1, pin=line.request_out, state=1.0)).success
    out['request'] = ok
    out['arrived'] = spin_until(lambda: digital_in(line.arrived_in), 30.0)
    out['request_out_shown'] = bool(got['io'][-1].digital_out_states[line.request_out].state)
    out['bad_pin'] = call(set_io, SetIO.Request(fun=1, pin=7, state=1.0)).success
    # The simulated cell's services: refused by name, and counted.
    r = call(reset, ResetCell.Request(level=11, seed=2))
    g = call(truth, GroundTruth.Request())
    out['reset'] = [r.error_code, r.error_msg, r.error_code == r.NOT_OFFERED]
    out['truth'] = [g.error_code, len(g.cartons)]
    spin_until(lambda: got.get('count') and got['count'][-1].data >= 2, 10.0)
    out['count'] = got['count'][-1].data if got.get('count') else None
    print('HARDWARE ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
