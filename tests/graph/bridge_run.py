"""Start the installed cell_bridge node and the bridge client with the standalone launcher."""

from __future__ import annotations

import sys
from pathlib import Path

from palletizer.launcher.graph import NodeSpec, describe, parse_launch_args
from palletizer.launcher.process import GraphRunner

if __name__ == '__main__':
    nodes = describe(parse_launch_args(sys.argv[1:]))
    bridge = next(n for n in nodes if n.name == 'cell_bridge')
    client = NodeSpec(
        name='bridge_client',
        executable='bridge_client',
        required=True,
        command=(sys.executable, str(Path(__file__).with_name('bridge_client.py'))),
    )
    sys.exit(GraphRunner([bridge, client], grace_s=3.0).run())
