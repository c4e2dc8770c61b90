"""Start the installed cell_bridge and trajectory_executor nodes and the executor client."""

from __future__ import annotations

import sys
from pathlib import Path

from palletizer.launcher.graph import NodeSpec, describe, parse_launch_args
from palletizer.launcher.process import GraphRunner

if __name__ == '__main__':
    nodes = describe(parse_launch_args(sys.argv[1:]))
    picked = [n for n in nodes if n.name in ('cell_bridge', 'trajectory_executor')]
    client = NodeSpec(
        name='executor_client',
        executable='executor_client',
        required=True,
        command=(sys.executable, str(Path(__file__).with_name('executor_client.py'))),
    )
    sys.exit(GraphRunner([*picked, client], grace_s=3.0).run())
