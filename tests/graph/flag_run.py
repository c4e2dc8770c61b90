"""Build the depth_fusion and wrist_gauge nodes with each combination of modes and print the
oracle flag the director computes from what they report (one isolated process)."""

from __future__ import annotations

import itertools
import json
import threading

import rclpy
from palletizer.core.oracle import oracle_flag, reads_truth
from palletizer.nodes.depth_fusion import DepthFusionNode
from palletizer.nodes.episode_director import MODE_PARAMETERS
from palletizer.nodes.wrist_gauge import WristGaugeNode
from rcl_interfaces.srv import GetParameters
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node


def _read(probe: Node, node: str, name: str) -> str:
    cli = probe.create_client(GetParameters, f'/{node}/get_parameters')
    assert cli.wait_for_service(timeout_sec=20.0), node
    done = threading.Event()
    fut = cli.call_async(GetParameters.Request(names=[name]))
    fut.add_done_callback(lambda _f: done.set())
    assert done.wait(20.0), (node, name)
    return fut.result().values[0].string_value


def main() -> None:
    out = []
    for m, d, g in itertools.product(
        ('cameras', 'oracle'), ('cameras', 'oracle'), ('wrench', 'oracle')
    ):
        rclpy.init(
            args=['--ros-args', '-p', f'map:={m}', '-p', f'detector:={d}', '-p', f'mode:={g}']
        )
        nodes = [DepthFusionNode(), WristGaugeNode(), Node('flag_probe')]
        ex = MultiThreadedExecutor(num_threads=4)
        for n in nodes:
            ex.add_node(n)
        spin = threading.Thread(target=ex.spin)
        spin.start()
        try:
            modes = [_read(nodes[2], node, name) for node, name, _ in MODE_PARAMETERS]
            built = {
                'map': nodes[0].map_mode,
                'detector': nodes[0].detector_mode,
                'gauge': nodes[1].mode,
            }
            out.append(
                {
                    'asked': [m, d, g],
                    'built': built,
                    'reported': modes,
                    'oracle': oracle_flag(
                        *(
                            reads_truth(k, v)
                            for (_, _, k), v in zip(MODE_PARAMETERS, modes, strict=True)
                        ),
                        False,
                    ),
                }
            )
        finally:
            # Stop the spinning thread before the nodes and the context go: a thread still in
            # the executor at interpreter exit aborts the process (std::terminate).
            ex.shutdown(timeout_sec=10.0)
            spin.join(timeout=10.0)
            for n in nodes:
                n.destroy_node()
            rclpy.shutdown()
    print('FLAGS ' + json.dumps(out), flush=True)


if __name__ == '__main__':
    main()
