"""`scripts/palletize`: run episodes of a level through the full node graph on real rclpy.

Options mirror the launch arguments (`--level 23` is `level:=23`); `name:=value` arguments are
accepted too. Bad arguments fail before anything starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
from collections.abc import Sequence

from palletizer.core.errors import PalletizerError
from palletizer.launcher.graph import PLANNERS, GraphOptions, describe, options_from_mapping
from palletizer.launcher.process import GraphRunner

__all__ = ['build_options', 'main', 'missing_nodes']

# Which capability each node brings, for the message when a node is not there yet.
_NODE_ROLES = {
    'cell_bridge': 'the MuJoCo cell and its bridge',
    'state_publisher': 'the robot description and link TFs',
    'depth_fusion': 'height-map fusion and carton detection',
    'wrist_gauge': 'in-hand weighing from the wrist wrench',
    'planner': 'the placement planner service',
    'trajectory_executor': 'IK, trajectories and the pick/place actions',
    'telemetry': 'disk telemetry and bags',
    'episode_director': 'the episode loop',
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='scripts/palletize',
        description='Palletize the cartons of a level with the full ROS 2 node graph.',
        epilog='name:=value launch arguments (as for ros2 launch) are accepted as well.',
    )
    p.add_argument('-n', '--episodes', type=int, default=1, help='episodes to run (>= 1)')
    p.add_argument(
        '--seed', type=int, default=1, help='seed of the first episode; episode k uses seed + k'
    )
    p.add_argument(
        '--level', type=int, help="level id (default: the source's first level, else 11)"
    )
    p.add_argument('--source', choices=('table', 'conveyor', 'truck'), help='restrict to a source')
    p.add_argument('--planner', choices=PLANNERS, default='heuristic')
    p.add_argument('--speed', type=float, default=0.0, help='0 = fast-forward; 1 = real UR speed')
    p.add_argument('--no-telemetry', action='store_true', help='write nothing (telemetry off)')
    p.add_argument('--robot', choices=('sim', 'ur'), default='sim')
    return p


def build_options(argv: Sequence[str]) -> GraphOptions:
    """Parse command-line options into validated GraphOptions (raises PalletizerError)."""
    launch_args = [a for a in argv if ':=' in a]
    ns = _parser().parse_args([a for a in argv if ':=' not in a])
    values = {
        'episodes': str(ns.episodes),
        'seed': str(ns.seed),
        'planner': ns.planner,
        'speed': str(ns.speed),
        'robot': ns.robot,
        'telemetry': 'off' if ns.no_telemetry else 'disk',
    }
    if ns.level is not None:
        values['level'] = str(ns.level)
    for arg in launch_args:
        name, _, value = arg.partition(':=')
        values[name] = value
    return options_from_mapping(values, source=ns.source)


def missing_nodes(opts: GraphOptions) -> list[str]:
    """Nodes of the graph whose module is not in this installation yet."""
    return [
        n.name
        for n in describe(opts)
        if importlib.util.find_spec(f'palletizer.nodes.{n.executable}') is None
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = build_options(args)
    except PalletizerError as exc:
        print(f'palletize: error: {exc}', file=sys.stderr)
        return 2
    missing = missing_nodes(opts)
    if missing:
        lines = '\n'.join(f'  - {n}: {_NODE_ROLES.get(n, n)}' for n in missing)
        print(
            f'palletize: level {opts.level} ({opts.source}) cannot run yet; these nodes of the '
            f'graph are not implemented in this version:\n{lines}',
            file=sys.stderr,
        )
        return 3
    runner = GraphRunner(describe(opts), log_level=opts.log_level)
    signal.signal(signal.SIGINT, lambda s, _f: runner.stop(f'received {signal.Signals(s).name}'))
    signal.signal(signal.SIGTERM, lambda s, _f: runner.stop(f'received {signal.Signals(s).name}'))
    runner.start()
    return runner.run()


if __name__ == '__main__':
    sys.exit(main())
