"""Launch the exchange server and client as a graph with the standalone launcher."""

from __future__ import annotations

import sys
from pathlib import Path

from palletizer.launcher.graph import NodeSpec
from palletizer.launcher.process import GraphRunner

PEERS = str(Path(__file__).with_name('peers.py'))

if __name__ == '__main__':
    runner = GraphRunner(
        [
            NodeSpec(
                name='exchange_server',
                executable='peers',
                command=(sys.executable, PEERS, 'server'),
            ),
            NodeSpec(
                name='exchange_client',
                executable='peers',
                command=(sys.executable, PEERS, 'client'),
                required=True,
            ),
        ],
        grace_s=3.0,
    )
    sys.exit(runner.run())
