"""The one declarative node graph: which nodes run, with what names, parameters and remappings.

Both `ros2 launch palletizer level.launch.py` (through launch/*.launch.py) and the standalone
launcher (`python -m palletizer.launcher`) build their processes from `describe()`, so the two
ways to launch cannot drift apart.

Why one file of this length: the launch arguments, their validation and the graph they select
are one table read together; splitting it would put an argument and its node apart.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from palletizer.core.config import SOURCES, Config, config_dir, load_config, read_yaml
from palletizer.core.errors import ConfigError, GraphError, PalletizerError, close_match
from palletizer.core.vocab import PerceptionMode, PlannerKind, TelemetryMode

__all__ = [
    'LAUNCH_ARGUMENTS',
    'PERCEPTION_MODES',
    'PLANNERS',
    'ROBOTS',
    'TELEMETRY_MODES',
    'GraphOptions',
    'LaunchArgument',
    'NodeSpec',
    'check_dds_profile',
    'check_mujoco_gl',
    'check_runs_folder',
    'describe',
    'launch_node_kwargs',
    'options_from_mapping',
    'params_file_value',
    'parse_launch_args',
]

PACKAGE = 'palletizer'
PLANNERS = PlannerKind.names()
ROBOTS = ('sim', 'ur')
CELL_PROFILES = ('lockstep', 'hardware')  # nodes/cell_hardware.py PROFILES
TELEMETRY_MODES = TelemetryMode.names()
PERCEPTION_MODES = PerceptionMode.names()
VIZ_MODES = ('none', 'foxglove')
FOXGLOVE_PORT = 8765  # Foxglove's default WebSocket port
LOG_LEVELS = ('debug', 'info', 'warn', 'error', 'fatal')
# Every episode's seed (seed + k) travels in palletizer_msgs/srv/ResetCell.srv as `int32 seed`.
SEED_MAX = 2**31 - 1

# The UR driver's own names: with robot:=ur the executor talks to a real ur_robot_driver.
UR_TRAJECTORY_ACTION = '/scaled_joint_trajectory_controller/follow_joint_trajectory'
UR_SET_IO_SERVICE = '/io_and_status_controller/set_io'
UR_WRENCH_TOPIC = '/force_torque_sensor_broadcaster/wrench'


@dataclass(frozen=True)
class LaunchArgument:
    """A launch argument: name, default (as text) and description."""

    name: str
    default: str
    description: str


LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument(
        'level', '', 'level id (11-17 table, 21-23 conveyor, 31-34 truck); empty = default'
    ),
    LaunchArgument('seed', '1', 'load seed of the first episode; episode k uses seed + k'),
    LaunchArgument('episodes', '1', 'number of episodes (>= 1)'),
    LaunchArgument('planner', 'heuristic', 'placement planner: heuristic | beam | grid'),
    LaunchArgument(
        'planner_weights',
        '',
        'heuristic weights file (JSON or YAML with a `weights` mapping of the 14 terms, e.g. '
        "scripts/train's best_weights.json); empty = configs/planner.yaml; planner:=heuristic only",
    ),
    LaunchArgument(
        'pallet_spec',
        '',
        'pallet spec file (YAML or JSON, docs/pallet-spec.md): the planner keeps its hard rules '
        '(a spec with hard rules needs planner:=heuristic or beam) and each episode line '
        "measures the stack against it; empty = the level's own (rule levels 18, 24, 35), "
        'none = no spec',
    ),
    LaunchArgument(
        'perception',
        'cameras',
        'cameras = height map and pick detection from the cameras; oracle = from simulator '
        'truth (the run is flagged oracle)',
    ),
    LaunchArgument(
        'speed', '0', 'motion speed: 0 = fast-forward, > 0 interpolated (1 = real UR speed)'
    ),
    LaunchArgument(
        'robot', 'sim', 'sim = MuJoCo cell bridge; ur = a real UR driver provides the arm'
    ),
    LaunchArgument(
        'cell',
        'lockstep',
        'lockstep = the simulated cell advances only when asked (deterministic, the '
        "benchmarks' profile); hardware = it runs on in real time and offers only a real "
        "UR10e cell's interfaces, which the palletizer then uses alone (docs/real-cell.md); "
        'robot:=sim only, speed > 0',
    ),
    LaunchArgument(
        'stability',
        'false',
        'true = run the physical stability trials (configs/stability.yaml: 15 jolts, 2 narrow '
        'beams, EUMOS) on the stack after each episode; results in the episode line '
        '(metrics.stability); robot:=sim only',
    ),
    LaunchArgument(
        'telemetry',
        'disk',
        'telemetry mode: disk | postgres | supabase (disk plus a replica) | off',
    ),
    LaunchArgument('use_sim_time', 'true', 'nodes follow /clock from the cell'),
    LaunchArgument('params_file', '', 'extra ROS parameters YAML, keyed by node name'),
    LaunchArgument('log_level', 'info', 'debug | info | warn | error | fatal'),
    LaunchArgument(
        'rviz', 'false', "true = also start rviz2 with the cell's configuration (where installed)"
    ),
    LaunchArgument(
        'viz',
        'none',
        "none | foxglove = also serve the cell's topics on a Foxglove WebSocket "
        f'(ws://127.0.0.1:{FOXGLOVE_PORT})',
    ),
)
_ARG_NAMES = tuple(a.name for a in LAUNCH_ARGUMENTS)


@dataclass(frozen=True)
class GraphOptions:
    """Validated launch options."""

    level: int
    seed: int = 1
    episodes: int = 1
    planner: str = 'heuristic'
    planner_weights: str = ''  # heuristic weights file, absolute; '' = configs/planner.yaml
    pallet_spec: str = ''  # pallet spec file, absolute; '' = none
    perception: str = 'cameras'
    speed: float = 0.0
    robot: str = 'sim'
    cell: str = 'lockstep'
    stability: bool = False
    telemetry: str = 'disk'
    use_sim_time: bool = True
    params_file: str = ''
    log_level: str = 'info'
    viz: str = 'none'
    rviz: bool = False
    source: str = ''  # the level's source (table | conveyor | truck)


@dataclass(frozen=True)
class NodeSpec:
    """One node process: executable, ROS name, parameters, remappings and lifecycle policy."""

    name: str
    executable: str
    package: str = PACKAGE
    parameters: Mapping[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    respawn: bool = False
    respawn_delay: float = 1.0  # [s]
    required: bool = False  # the whole graph stops when this node exits
    command: tuple[str, ...] = ()  # explicit argv instead of lib/<package>/<executable>
    args: tuple[str, ...] = ()  # the executable's own arguments, before --ros-args
    params_files: tuple[str, ...] = ()  # extra ROS parameter files, applied after `parameters`
    env: Mapping[str, str] = field(default_factory=dict)  # environment added to the process's


def _as_int(name: str, text: str, lo: int, hi: int | None = None) -> int:
    allowed = f'an integer >= {lo}' if hi is None else f'an integer in [{lo}, {hi}]'
    try:
        value = int(str(text).strip())
    except ValueError:
        raise GraphError(f'{name}:={text!r}; expected {allowed}') from None
    if value < lo or (hi is not None and value > hi):
        raise GraphError(f'{name}:={text!r}; expected {allowed}')
    return value


def _as_choice(name: str, text: str, allowed: Sequence[str]) -> str:
    value = str(text).strip()
    if value not in allowed:
        raise GraphError(
            f'{name}:={text!r}; expected one of {", ".join(allowed)}{close_match(value, allowed)}'
        )
    return value


def _as_bool(name: str, text: str) -> bool:
    value = str(text).strip().lower()
    if value in ('true', '1', 'yes'):
        return True
    if value in ('false', '0', 'no'):
        return False
    raise GraphError(f'{name}:={text!r}; expected true or false')


def options_from_mapping(
    values: Mapping[str, str], source: str | None = None, config: Config | None = None
) -> GraphOptions:
    """Validate launch argument values (text, as launch passes them) into GraphOptions.

    `source` restricts the level to one source, as the per-source launch files do; their default
    level is that source's first level.
    """
    for key in values:
        if key not in _ARG_NAMES:
            raise GraphError(
                f'unknown launch argument {key!r}; expected one of {", ".join(_ARG_NAMES)}'
                f'{close_match(key, _ARG_NAMES)}'
            )
    cfg = config or load_config()
    defaults = {a.name: a.default for a in LAUNCH_ARGUMENTS}
    v = {**defaults, **{k: str(x) for k, x in values.items()}}
    if source is not None:
        _as_choice('source', source, tuple(SOURCES))
    allowed = cfg.levels_of(source) if source else tuple(sorted(cfg.levels))
    if v['level'].strip() == '':
        level = allowed[0] if source else cfg.default_level
    else:
        level = _as_int('level', v['level'], 0)
        if level not in allowed:
            where = f'{source} levels' if source else 'levels'
            raise GraphError(
                f'level:={v["level"]!r}; expected one of the {where}: '
                f'{", ".join(str(i) for i in allowed)}'
            )
    try:
        speed = float(v['speed'])
    except ValueError:
        raise GraphError(f'speed:={v["speed"]!r}; expected a number >= 0') from None
    if not math.isfinite(speed) or speed < 0:
        raise GraphError(f'speed:={v["speed"]!r}; expected a number >= 0 (0 = fast-forward)')
    seed = _as_int('seed', v['seed'], 0, SEED_MAX)
    episodes = _as_int('episodes', v['episodes'], 1)
    if seed + episodes - 1 > SEED_MAX:
        raise GraphError(
            f'seed:={v["seed"]!r} with episodes:={v["episodes"]!r} runs seeds up to '
            f'{seed + episodes - 1}; expected seed + episodes - 1 <= {SEED_MAX} (ResetCell seed '
            f'is int32)'
        )
    planner = _as_choice('planner', v['planner'], PLANNERS)
    if PlannerKind(planner).uses_reach_table:
        _check_reach_table(cfg, planner)
    planner_weights = _check_planner_weights(v['planner_weights'].strip(), planner)
    pallet_spec = _check_pallet_spec(v['pallet_spec'].strip(), planner, cfg, level)
    params_file = v['params_file'].strip()
    if params_file:
        _check_params_file(params_file)
    robot = _as_choice('robot', v['robot'], ROBOTS)
    check_dds_profile()
    if robot == 'sim':
        check_mujoco_gl()
    cell = _as_choice('cell', v['cell'], CELL_PROFILES)
    if cell == 'hardware' and robot != 'sim':
        raise GraphError(
            f'cell:=hardware with robot:={robot}; the hardware profile is one of the simulated '
            "cell's: robot:=sim only (robot:=ur uses a real cell's interfaces anyway)"
        )
    if cell == 'hardware' and speed == 0:
        raise GraphError(
            'cell:=hardware with speed:=0; the hardware profile runs the world in real time '
            'and tracks every trajectory: expected speed > 0 (speed:=1)'
        )
    perception = _as_choice('perception', v['perception'], PERCEPTION_MODES)
    if perception == 'oracle' and (robot != 'sim' or cell != 'lockstep'):
        raise GraphError(
            f'perception:=oracle with robot:={robot} cell:={cell}; the oracle reads the '
            "simulator's ground truth, which no real cell has: robot:=sim cell:=lockstep only"
        )
    stability = _as_bool('stability', v['stability'])
    if stability and (robot != 'sim' or cell != 'lockstep'):
        raise GraphError(
            f'stability:=true with robot:={robot} cell:={cell}; the stability trials shake '
            'the simulated stack, a service no real cell has: robot:=sim cell:=lockstep only'
        )
    return GraphOptions(
        level=level,
        seed=seed,
        episodes=episodes,
        planner=planner,
        planner_weights=planner_weights,
        pallet_spec=pallet_spec,
        perception=perception,
        speed=speed,
        robot=robot,
        cell=cell,
        stability=stability,
        telemetry=_as_choice('telemetry', v['telemetry'], TELEMETRY_MODES),
        use_sim_time=_as_bool('use_sim_time', v['use_sim_time']),
        params_file=params_file,
        log_level=_as_choice('log_level', v['log_level'], LOG_LEVELS),
        viz=_as_choice('viz', v['viz'], VIZ_MODES),
        rviz=_check_rviz(_as_bool('rviz', v['rviz'])),
        source=cfg.level(level).source,
    )


def rviz_config() -> Path:
    """The cell's RViz configuration: rviz/palletizer.rviz beside configs/ (repository or share)."""
    return config_dir().parent / 'rviz' / 'palletizer.rviz'


def _check_rviz(wanted: bool) -> bool:
    """rviz:=true needs rviz2 on the PATH (a ROS 2 install), and the configuration file."""
    if wanted and shutil.which('rviz2') is None:
        raise GraphError(
            'rviz:=true; rviz2 is not installed here (on ROS 2 Jazzy: sudo apt install '
            'ros-jazzy-rviz2); without it use viz:=foxglove, or rviz:=false'
        )
    if wanted and not rviz_config().is_file():
        raise GraphError(f'rviz:=true; the configuration {rviz_config()} is missing')
    return wanted


def _check_reach_table(cfg: Config, planner: str) -> None:
    """The planners that plan with the reach table (PlannerKind.uses_reach_table): a missing or
    corrupt one fails here, before any node starts."""
    from palletizer.core.motion import ReachTable  # only those planners need it (0.3 s import)

    try:
        ReachTable.load(cfg.reach_table)
    except PalletizerError as exc:
        raise GraphError(f'planner:={planner} needs the reach table: {exc}') from None


def _check_planner_weights(text: str, planner: str) -> str:
    """planner_weights:=FILE: a readable weights file of the 14 heuristic terms, for the
    heuristic; returned absolute (the planner node runs in its own working directory)."""
    if not text:
        return ''
    if planner != 'heuristic':
        raise GraphError(
            f'planner_weights:={text!r} with planner:={planner}; the weights file holds the '
            '14 heuristic weights: use planner:=heuristic, or drop planner_weights'
        )
    from palletizer.core.params.planning import read_weights

    try:
        read_weights(text)
    except PalletizerError as exc:
        raise GraphError(f'planner_weights:={text!r}: {exc}') from None
    return str(Path(text).resolve())


def _check_pallet_spec(text: str, planner: str, cfg: Config, level: int) -> str:
    """pallet_spec:=FILE: a spec that validates against its schema and the catalogue's types;
    one with hard rules only with the planners that keep them. Empty: the level's own spec
    (configs/levels.yaml `spec`), if it has one; 'none': no spec. Returned absolute (the nodes
    run in their own working directory)."""
    from palletizer.core.pallet_spec import level_spec_path, read_spec

    if text == 'none':
        return ''
    if not text:
        own = level_spec_path(cfg, level)
        if own is None:
            return ''
        text = str(own)
    from palletizer.core.planning.spec_rules import SpecRules

    try:
        spec = read_spec(text, types=cfg.catalogue.types)
    except PalletizerError as exc:
        raise GraphError(f'pallet_spec:={text!r}: {exc}') from None
    if planner == 'grid' and SpecRules(spec, None, (0.0, 0.0)).active:
        raise GraphError(
            f'pallet_spec:={text!r} with planner:={planner}; the spec has hard rules and only '
            'the heuristic and beam search plan to them: use planner:=heuristic or beam'
        )
    return str(Path(text).resolve())


def _check_params_file(text: str) -> None:
    """A ROS parameters file: readable YAML, keyed by node names, each with ros__parameters."""
    where = f'params_file:={text!r}'
    path = Path(text)
    if not path.is_file():
        what = 'is a folder' if path.is_dir() else 'does not exist'
        raise GraphError(f'{where}: {what}; expected a ROS parameters YAML file')
    try:
        doc = read_yaml(path)
    except ConfigError as exc:
        raise GraphError(f'{where}: {exc}') from None
    shape = 'a mapping of node names to {ros__parameters: {...}}'
    if not isinstance(doc, dict) or not doc:
        what = 'is empty' if not doc else f'holds a {type(doc).__name__}'
        raise GraphError(f'{where}: the file {what}; expected {shape}')
    names = [n.name for n in _nodes(GraphOptions(level=0, robot='sim'))]
    for key, section in doc.items():
        name = str(key).lstrip('/')
        if '*' not in name and name not in names:
            raise GraphError(
                f'{where}: {key!r} is not a node of the graph; expected one of '
                f'{", ".join(names)} or a wildcard like /**{close_match(name, names)}'
            )
        if not isinstance(section, dict) or not isinstance(section.get('ros__parameters'), dict):
            raise GraphError(
                f'{where}: {key} has no ros__parameters mapping; expected {key}: '
                f'{{ros__parameters: {{...}}}}'
            )
        for pname, value in section['ros__parameters'].items():
            _check_param_type(where, name, str(pname), value)


# Parameters a node declares that the launcher does not set, by node: their defaults' types.
_NODE_OWN_PARAMETERS: dict[str, dict[str, Any]] = {
    'telemetry': {
        'runs_dir': '',
        'run_stamp': '',
        'tag': '',
        'min_free_mb': 0.0,
        'end_wait_s': 0.0,
    },
}
_ROS_TYPES = {
    bool: 'a bool (true or false)',
    int: 'an integer',
    float: 'a double',
    str: 'a string',
}


def _declared_types(node: str) -> dict[str, type]:
    """The type of each parameter `node` is known to declare (for a wildcard: of every node
    that declares it with one type); rclpy refuses a value of another type at the node's start."""
    graph = _nodes(GraphOptions(level=0, robot='sim'))
    seen: dict[str, set[type]] = {}
    for n in graph:
        if '*' in node or n.name == node:
            params = {**_NODE_OWN_PARAMETERS.get(n.name, {}), **n.parameters}
            for pname, default in params.items():
                seen.setdefault(pname, set()).add(type(default))
    return {k: next(iter(t)) for k, t in seen.items() if len(t) == 1}


def _check_param_type(where: str, node: str, name: str, value: Any) -> None:
    """A params-file value of the declared type, as rclpy checks it (no int for a double)."""
    want = _declared_types(node).get(name)
    if want is None or type(value) is want:
        return
    shown = 'null' if value is None else repr(value)
    raise GraphError(
        f'{where}: {node}.ros__parameters.{name} = {shown}; expected {_ROS_TYPES[want]} '
        f'(the node declares {name} as {want.__name__} and would refuse to start)'
    )


def params_file_value(text: str, node: str, name: str) -> Any:
    """The value a params file gives `node`'s parameter `name` (a named section wins over a
    wildcard), or None when it gives none. The file was checked by options_from_mapping."""
    if not text:
        return None
    doc = read_yaml(Path(text))
    found = None
    for key, section in doc.items():
        key = str(key).lstrip('/')
        params = section.get('ros__parameters', {})
        if name in params and (key == node or ('*' in key and found is None)):
            found = params[name]
    return found


def parse_launch_args(
    argv: Sequence[str], source: str | None = None, config: Config | None = None
) -> GraphOptions:
    """Parse `name:=value` arguments, as `ros2 launch` takes them."""
    values: dict[str, str] = {}
    for arg in argv:
        if ':=' not in arg:
            raise GraphError(f'argument {arg!r}; expected name:=value (e.g. level:=23)')
        name, _, value = arg.partition(':=')
        if name in values:
            raise GraphError(f'argument {name!r} given twice')
        values[name] = value
    return options_from_mapping(values, source=source, config=config)


# Fast DDS reads its default participant profile from this variable (Fast DDS 2.14, Jazzy).
DDS_PROFILE_ENV = 'FASTRTPS_DEFAULT_PROFILES_FILE'


def dds_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every node gets: configs/fastdds.xml (a 2 s participant lease, so a
    dead node leaves the graph within ~2 s) unless the environment names a profile already."""
    env = os.environ if environ is None else environ
    if env.get(DDS_PROFILE_ENV) or env.get('FASTDDS_DEFAULT_PROFILES_FILE'):
        return {}
    return {DDS_PROFILE_ENV: str(config_dir() / 'fastdds.xml')}


def check_dds_profile(environ: Mapping[str, str] | None = None) -> None:
    """The Fast DDS profile the nodes get must parse: Fast DDS replaces a corrupt one by its
    defaults without a word, and then a dead node stays in the graph for the 20 s default lease
    instead of the profile's 2 s (Calls relies on it)."""
    import xml.etree.ElementTree as ET

    env = os.environ if environ is None else environ
    named = env.get(DDS_PROFILE_ENV) or env.get('FASTDDS_DEFAULT_PROFILES_FILE')
    path = Path(named) if named else config_dir() / 'fastdds.xml'
    try:
        root = ET.parse(path).getroot()
    except OSError as exc:
        raise GraphError(
            f'{path}: cannot read the Fast DDS profile ({exc.strerror or exc}); expected the '
            'participant profile of configs/fastdds.xml'
        ) from None
    except ET.ParseError as exc:
        line, col = exc.position
        raise GraphError(
            f'{path}: not valid XML at line {line}, column {col + 1}; Fast DDS would fall back '
            'to its defaults (a 20 s lease, not 2 s): fix the file or restore configs/fastdds.xml'
        ) from None
    if root.tag.rpartition('}')[2] not in ('profiles', 'dds'):
        raise GraphError(
            f'{path}: root element <{root.tag.rpartition("}")[2]}>; expected <profiles> (a '
            'Fast DDS profiles file)'
        )


def check_mujoco_gl(environ: Mapping[str, str] | None = None) -> None:
    """MUJOCO_GL the cell can render with: glfw needs a display; egl and osmesa do not."""
    env = os.environ if environ is None else environ
    gl = env.get('MUJOCO_GL')
    if gl is None:
        return  # palletizer.sim picks egl when there is no display
    if gl not in ('egl', 'osmesa', 'glfw'):
        raise GraphError(
            f'MUJOCO_GL={gl!r}; expected egl (headless GPU), osmesa (headless CPU) or glfw '
            '(a display)'
        )
    if gl == 'glfw' and not (env.get('DISPLAY') or env.get('WAYLAND_DISPLAY')):
        raise GraphError(
            'MUJOCO_GL=glfw needs a display, and DISPLAY is not set; for a headless run use '
            'MUJOCO_GL=egl (or unset MUJOCO_GL)'
        )


def check_runs_folder(opts: GraphOptions, config: Config | None = None) -> None:
    """The runs folder telemetry will write (configs/telemetry.yaml, or the params file's
    telemetry runs_dir and min_free_mb) takes a run; checked before any node starts."""
    if opts.telemetry == 'off':
        return
    from palletizer.telemetry import preflight

    tel = (config or load_config()).telemetry
    runs = params_file_value(opts.params_file, 'telemetry', 'runs_dir')
    free = params_file_value(opts.params_file, 'telemetry', 'min_free_mb')
    tel = replace(
        tel,
        runs_dir=runs or tel.runs_dir,
        min_free_mb=tel.min_free_mb if free is None else float(free),
    )
    try:
        preflight(tel)
    except PalletizerError as exc:
        where = f'params_file:={opts.params_file!r}: ' if runs or free is not None else ''
        raise GraphError(f'{where}{exc}') from None


def describe(opts: GraphOptions) -> tuple[NodeSpec, ...]:
    """The node graph for these options, in start order."""
    env = dds_env()
    nodes = tuple(replace(n, env={**env, **n.env}) for n in _nodes(opts))
    if opts.params_file:
        nodes = tuple(replace(n, params_files=(opts.params_file,)) for n in nodes)
    return nodes


def _nodes(opts: GraphOptions) -> tuple[NodeSpec, ...]:
    common = {'use_sim_time': opts.use_sim_time}
    # The palletizer on a real cell's interfaces alone: with a real robot, or the hardware
    # profile of the simulated cell (docs/real-cell.md).
    real = opts.robot == 'ur' or opts.cell == 'hardware'
    joint_states = (('joint_states', '/joint_states'),)
    nodes: list[NodeSpec] = []
    if opts.robot == 'sim':
        nodes.append(
            NodeSpec(
                name='cell_bridge',
                executable='cell_bridge',
                # The cell publishes /clock itself, so it never follows sim time.
                parameters={
                    'use_sim_time': False,
                    'level': opts.level,
                    'seed': opts.seed,
                    'speed': opts.speed,
                    'profile': opts.cell,
                    'trajectory_action': UR_TRAJECTORY_ACTION,
                    'set_io_service': UR_SET_IO_SERVICE,
                    'wrench_topic': UR_WRENCH_TOPIC,
                },
                remappings=joint_states,
                required=True,
            )
        )
    nodes += [
        NodeSpec(
            name='state_publisher',
            executable='state_publisher',
            parameters=common,
            remappings=joint_states,
            respawn=True,
        ),
        NodeSpec(
            name='depth_fusion',
            executable='depth_fusion',
            parameters={
                **common,
                'map': opts.perception,
                'detector': opts.perception,
                'level': opts.level,
                # Streaming cameras on a real cell; the lockstep cell renders on request.
                'capture_service': '' if real else '/cell_bridge/capture',
            },
            remappings=(
                ('heightmap', '/palletizer/heightmap'),
                ('points', '/palletizer/points'),
                ('detection', '/palletizer/detection'),
                ('joint_states', '/joint_states'),
            ),
            respawn=True,
        ),
        NodeSpec(
            name='wrist_gauge',
            executable='wrist_gauge',
            parameters={**common, 'wrench_topic': UR_WRENCH_TOPIC, 'mode': 'wrench'},
            respawn=True,
        ),
        NodeSpec(
            name='planner',
            executable='planner',
            parameters={
                **common,
                'kind': opts.planner,
                'weights_file': opts.planner_weights,
                'pallet_spec': opts.pallet_spec,
            },
            respawn=True,
        ),
        NodeSpec(
            name='trajectory_executor',
            executable='trajectory_executor',
            parameters={
                **common,
                'level': opts.level,
                'speed': opts.speed,
                'trajectory_action': UR_TRAJECTORY_ACTION,
                'set_io_service': UR_SET_IO_SERVICE,
                'wrench_topic': UR_WRENCH_TOPIC,
                'vacuum_fun': 1,  # ur_msgs/SetIO FUN_SET_DIGITAL_OUT
                'vacuum_pin': 0,
            },
            remappings=joint_states,
        ),
        NodeSpec(
            name='telemetry',
            executable='telemetry',
            parameters={**common, 'mode': opts.telemetry},
            remappings=(
                ('heightmap', '/palletizer/heightmap'),
                ('episode_events', '/palletizer/episode_events'),
                ('placements', '/palletizer/placements'),
                ('pallet_states', '/palletizer/pallet_states'),
            ),
        ),
        NodeSpec(
            name='episode_director',
            executable='episode_director',
            parameters={
                **common,
                'level': opts.level,
                'seed': opts.seed,
                'episodes': opts.episodes,
                'planner': opts.planner,
                'speed': opts.speed,
                'robot': opts.robot,
                'cell_interfaces': 'real' if real else 'sim',
                'stability': opts.stability,
                'telemetry': opts.telemetry,
            },
            remappings=(
                ('episode_events', '/palletizer/episode_events'),
                ('placements', '/palletizer/placements'),
                ('pallet_states', '/palletizer/pallet_states'),
            ),
            required=True,
        ),
    ]
    nodes.insert(
        len(nodes) - 1,  # before the director, so it sees the first carton
        NodeSpec(
            name='viz_markers',
            executable='viz_markers',
            parameters=common,
            remappings=(
                ('heightmap', '/palletizer/heightmap'),
                ('episode_events', '/palletizer/episode_events'),
                ('placements', '/palletizer/placements'),
                ('pallet_states', '/palletizer/pallet_states'),
            ),
            respawn=True,
        ),
    )
    if opts.rviz:
        nodes.append(
            NodeSpec(
                name='rviz2',
                package='rviz2',
                executable='rviz2',
                command=(str(shutil.which('rviz2')),),
                args=('-d', str(rviz_config())),
                parameters=common,
            )
        )
    if opts.viz == 'foxglove':
        nodes.append(
            NodeSpec(
                name='foxglove_bridge',
                executable='foxglove_bridge',
                parameters={**common, 'host': '127.0.0.1', 'port': FOXGLOVE_PORT},
                respawn=True,
            )
        )
    return tuple(nodes)


def launch_node_kwargs(
    values: Mapping[str, str], source: str | None = None
) -> list[dict[str, Any]]:
    """Keyword arguments for launch_ros.actions.Node, one dict per node of the graph.

    This is all the launch files do: they declare LAUNCH_ARGUMENTS, resolve them, and pass these
    to Node(...). Keeping the translation here makes it testable without the launch package.
    """
    opts = options_from_mapping(values, source=source)
    check_runs_folder(opts)  # as scripts/palletize does before it starts a node
    out = []
    for n in describe(opts):
        params: list[Any] = [dict(n.parameters), *n.params_files]
        out.append(
            {
                'package': n.package,
                'executable': n.executable,
                'name': n.name,
                'parameters': params,
                'remappings': [tuple(r) for r in n.remappings],
                'respawn': n.respawn,
                'respawn_delay': n.respawn_delay,
                # Not a Node() argument: the launch files turn it into
                # on_exit=required_node_exited.
                'required': n.required,
                'additional_env': dict(n.env),
                'output': 'screen',
                'arguments': [*n.args, '--ros-args', '--log-level', opts.log_level],
            }
        )
    return out


def required_node_exited(event: Any, context: Any) -> list[Any]:
    """on_exit of a required node (the director) under `ros2 launch`: its exit ends the launch.

    A non-zero code (the director's for a failed or aborted run, or a node that died) makes
    `ros2 launch` exit 1: in Jazzy, LaunchService.run() returns non-zero only for an error raised
    in the launch, not for a process's exit code (docs/interfaces.md §9.5).
    """
    from launch.actions import Shutdown  # only under ros2 launch; the launcher needs no launch

    if event.returncode == 0:
        return [Shutdown(reason=f'required node {event.process_name} finished')]
    raise GraphError(f'required node {event.process_name} exited with code {event.returncode}')


def with_command(spec: NodeSpec, command: Sequence[str]) -> NodeSpec:
    """A copy of `spec` that runs an explicit argv (used by tests and custom graphs)."""
    return replace(spec, command=tuple(command))
