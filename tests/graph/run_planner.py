"""Start the installed planner node and the plan client with the standalone launcher."""

from __future__ import annotations

import sys
from pathlib import Path

from palletizer.launcher.graph import NodeSpec, describe, parse_launch_args
from palletizer.launcher.process import GraphRunner

if __name__ == '__main__':
    planner = next(n for n in describe(parse_launch_args(sys.argv[1:])) if n.name == 'planner')
    client = NodeSpec(
        name='plan_client',
        executable='plan_client',
        required=True,
        command=(sys.executable, str(Path(__file__).with_name('plan_client.py'))),
    )
    sys.exit(GraphRunner([planner, client], grace_s=3.0).run())
