"""Start the installed cell_bridge node and a client (bridge_client.py, or the script named by a
first argument ending in .py) with the standalone launcher."""

from __future__ import annotations

import sys
from pathlib import Path

from palletizer.launcher.graph import NodeSpec, describe, parse_launch_args
from palletizer.launcher.process import GraphRunner

if __name__ == '__main__':
    args = sys.argv[1:]
    script = args.pop(0) if args and args[0].endswith('.py') else 'bridge_client.py'
    nodes = describe(parse_launch_args(args))
    bridge = next(n for n in nodes if n.name == 'cell_bridge')
    client = NodeSpec(
        name='bridge_client',
        executable='bridge_client',
        required=True,
        command=(sys.executable, str(Path(__file__).with_name(script))),
    )
    sys.exit(GraphRunner([bridge, client], grace_s=3.0).run())
