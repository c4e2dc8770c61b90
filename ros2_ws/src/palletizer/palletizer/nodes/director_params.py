"""The episode director's parameters: their names, defaults and descriptions, read once at start.

`declare_params` declares them on the node in one place and refuses a combination the director
cannot run (unknown cell interfaces, the stability trials on a real cell). The configuration is
loaded after the parameters that need none, as the wrist reading's hold defaults from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node

from palletizer.core.config import Config, load_config
from palletizer.core.errors import PalletizerError
from palletizer.nodes.params import declare

__all__ = ['DirectorParams', 'declare_params']


@dataclass(frozen=True)
class DirectorParams:
    """The values of the episode director's parameters (docs/real-cell.md for the interfaces)."""

    level: int
    seed: int  # of the first episode; episode k uses seed + k
    episodes: int
    planner_kind: str  # heuristic | beam | grid
    speed: float  # motion speed the cell runs at (0 = fast-forward)
    robot: str  # sim | ur
    interfaces: str  # sim | real
    set_io: str  # the line: SetIO service
    io_states: str  # the line: IOStates topic
    trajectory_action: str  # the driver's FollowJointTrajectory action (robot:=ur)
    stability: bool  # the stability trials on the stack after each episode
    telemetry: str  # disk | postgres | supabase | off
    hold: float  # [s] arm held still before a wrist reading

    @property
    def real(self) -> bool:
        return self.interfaces == 'real'


def declare_params(node: Node) -> tuple[DirectorParams, Config]:
    """Declare the episode director's parameters on `node` and read them, with the configuration;
    PalletizerError when they do not go together."""
    level = int(declare(node, 'level', 11, 'level id'))
    seed = int(declare(node, 'seed', 1, 'seed of the first episode; episode k uses seed + k'))
    episodes = int(declare(node, 'episodes', 1, 'number of episodes'))
    planner_kind = declare(node, 'planner', 'heuristic', 'heuristic | beam | grid')
    speed = float(declare(node, 'speed', 0.0, 'motion speed the cell runs at (0 = fast-forward)'))
    robot = declare(node, 'robot', 'sim', 'sim | ur')
    interfaces = declare(
        node,
        'cell_interfaces',
        'sim',
        "sim = the simulated cell's services (reset, present, settle, capture, ground "
        "truth); real = a real cell's I/O, clock and cameras alone (docs/real-cell.md)",
    )
    if interfaces not in ('sim', 'real'):
        raise PalletizerError(
            f'episode_director: cell_interfaces:={interfaces!r}; expected sim or real'
        )
    set_io = declare(node, 'set_io_service', '/io_and_status_controller/set_io', 'the line: SetIO')
    io_states = declare(
        node, 'io_states_topic', '/io_and_status_controller/io_states', 'the line: IOStates'
    )
    trajectory_action = declare(
        node,
        'trajectory_action',
        '/scaled_joint_trajectory_controller/follow_joint_trajectory',
        "the driver's FollowJointTrajectory action, looked for at start with robot:=ur",
    )
    stability = bool(
        declare(
            node, 'stability', False, 'run the stability trials on the stack after each episode'
        )
    )
    if stability and interfaces == 'real':
        raise PalletizerError(
            'episode_director: stability:=true with cell_interfaces:=real; the trials shake '
            'the simulated stack, which a real cell cannot'
        )
    telemetry = declare(node, 'telemetry', 'disk', 'disk | postgres | supabase | off')
    cfg = load_config()
    gauge = cfg.perception.gauge
    hold = float(
        declare(
            node,
            'weigh_hold_s',
            gauge.samples / cfg.cell.wrench.rate_hz + gauge.settle_s,
            'arm held still before a wrist reading [s]: settle + the samples at the wrench rate',
        )
    )
    params = DirectorParams(
        level=level,
        seed=seed,
        episodes=episodes,
        planner_kind=planner_kind,
        speed=speed,
        robot=robot,
        interfaces=interfaces,
        set_io=set_io,
        io_states=io_states,
        trajectory_action=trajectory_action,
        stability=stability,
        telemetry=telemetry,
        hold=hold,
    )
    return params, cfg
