"""Start the hardware-profile cell as if it were ur_robot_driver and the camera drivers, and the
palletizer's graph under robot:=ur against it, with the standalone launcher. Launch arguments
(name:=value) go to both; the cell's own are the hardware profile's."""

from __future__ import annotations

import sys

from palletizer.launcher.graph import describe, parse_launch_args
from palletizer.launcher.process import GraphRunner

if __name__ == '__main__':
    args = sys.argv[1:]
    cell = next(
        n
        for n in describe(parse_launch_args([*args, 'cell:=hardware']))
        if n.name == 'cell_bridge'
    )
    palletizer = describe(parse_launch_args([*args, 'robot:=ur']))
    assert all(n.name != 'cell_bridge' for n in palletizer)
    sys.exit(GraphRunner([cell, *palletizer], grace_s=3.0).run())
