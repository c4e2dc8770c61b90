"""The MCP server's typed arguments and results (`scripts/mcp`, docs/mcp.md).

Each tool's JSON Schema comes from these pydantic models, so what an assistant reads is what
the server checks. Lengths are metres, masses kilograms, angles radians (the core's units).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from palletizer.core.errors import InvalidValue
from palletizer.core.pallet_spec import spec_schema

__all__ = [
    'SEED_MAX',
    'SEED_MIN',
    'CartonRow',
    'CellState',
    'EpisodeOutcome',
    'LevelInfo',
    'LevelList',
    'PreviewResult',
    'RunDetail',
    'RunInfo',
    'RunLimits',
    'RunList',
    'RunSummary',
    'Robot',
    'Seed',
    'SpecDoc',
    'SpecResult',
    'StopResult',
    'carton_row',
]

# The seeds an assistant may run: 1-100. Seeds above 100 are reserved (held-out loads), so the
# server refuses them whatever the command line allows.
SEED_MIN = 1
SEED_MAX = 100


def _check_seed(seed: int) -> int:
    if seed > SEED_MAX:
        raise InvalidValue(
            f'seed {seed}: seeds above {SEED_MAX} are reserved and never run from here; '
            f'allowed: {SEED_MIN}-{SEED_MAX}'
        )
    if seed < SEED_MIN:
        raise InvalidValue(f'seed {seed}; allowed: {SEED_MIN}-{SEED_MAX}')
    return seed


Seed = Annotated[
    int,
    AfterValidator(_check_seed),
    WithJsonSchema(
        {
            'type': 'integer',
            'minimum': SEED_MIN,
            'maximum': SEED_MAX,
            'description': f'the load draw, {SEED_MIN}-{SEED_MAX} (above {SEED_MAX}: reserved)',
        }
    ),
]


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every local `$ref` replaced by its definition, so that it stands alone
    inside another document (a tool's input schema)."""
    defs = schema.pop('$defs', {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get('$ref', '')
            if ref.startswith('#/$defs/'):
                return walk(
                    {
                        **defs[ref.removeprefix('#/$defs/')],
                        **{k: v for k, v in node.items() if k != '$ref'},
                    }
                )
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    out.pop('$schema', None)
    return out


# The spec is checked by core.pallet_spec.load_spec (each bad key named, catalogue types
# included), not by the SDK: its schema is shown, its value passes through as data.
SpecDoc = Annotated[
    dict[str, Any] | None,
    WithJsonSchema(
        {
            'anyOf': [_inline_refs(spec_schema()), {'type': 'null'}],
            'description': 'the pallet spec (docs/pallet-spec.md); null or {} clears it',
        }
    ),
]


class _Result(BaseModel):
    model_config = ConfigDict(extra='forbid')


class LevelInfo(_Result):
    id: int = Field(description='the level id (tens digit: 1 table, 2 conveyor, 3 truck)')
    source: str = Field(description='where the cartons come from')
    name: str
    cartons: int = Field(description='cartons in the load')
    spec: str | None = Field(description='the pallet spec a rule level is built to, if any')


class LevelList(_Result):
    levels: list[LevelInfo]
    default_level: int


class SpecResult(_Result):
    spec: dict[str, Any] | None = Field(
        description='the normalised spec (rules that are off left out); null: no rule is on'
    )
    rules_on: list[str] = Field(description='the rules the spec turns on')
    applies_to: str = Field(description='what the spec is used by')


class PreviewResult(_Result):
    found: bool = Field(description='whether the planner found a slot')
    planner: str
    stack: str = Field(description="the stack planned on: 'empty' or the run it was read from")
    stack_cartons: int = Field(description='cartons on the stack before this one')
    position_m: tuple[float, float, float] | None = Field(
        description='carton centre in the pallet frame: x, y from the pallet centre, z above '
        'the deck [m]'
    )
    yaw_rad: float | None
    layer: int | None
    slot: str | None
    score: float | None = Field(description='the planner score (heuristic: 0-1)')
    score_terms: dict[str, float] = Field(description='term name -> value in [0, 1]')
    predicted_support: float | None = Field(description='supported share of the footprint')
    stability_margin_m: float | None = Field(
        description='tipping margin of the stack with this carton [m] (negative tips)'
    )
    stability_margin_before_m: float | None = Field(
        description='tipping margin of the stack without it [m]; null for an empty pallet'
    )
    rejects: dict[str, int] = Field(description='rejected candidates per reason, when none fit')
    pallet_spec: bool = Field(description='whether the current pallet spec was applied')


class RunLimits(_Result):
    seed_min: int
    seed_max: int
    speed_max: float = Field(description='the speed cap (1 = real UR10e speed); 0 always allowed')
    planners: list[str]
    perception: list[str]
    runs_at_a_time: int = 1
    robot: Robot = Field(
        default='sim', description="the cell the server stands beside: 'sim' or a real 'ur'"
    )
    sim_only_off: list[str] = Field(
        default_factory=list, description='the simulation-only tools that are off (robot ur)'
    )


class CartonRow(_Result):
    package_id: str
    type: str
    layer: int
    error_mm: float = Field(description='placement error [mm]')
    support_pct: float = Field(description='supported share of the footprint [%]')
    margin_mm: float = Field(description='stack tipping margin after it [mm]')
    placed: bool = Field(description='within the placement tolerances')


Robot = Literal['sim', 'ur']  # as scripts/palletize robot:=
RunState = Literal['idle', 'starting', 'running', 'finished', 'aborted', 'crashed']


class RunInfo(_Result):
    state: RunState
    level: int | None = None
    seed: int | None = None
    planner: str | None = None
    speed: float | None = None
    perception: str | None = None
    pid: int | None = None
    run_dir: str | None = None
    exit_code: int | None = None


# The director's line per attempted carton (nodes/director_sink.py, DirectorSink.pallet_state).
_CARTON = re.compile(
    r'^\[episode_director\] {3}(?P<id>\S+)\s+(?P<type>\S+)\s+L(?P<layer>\d+)\s+'
    r'error\s+(?P<err>-?[\d.]+) mm\s+support\s+(?P<sup>[\d.]+) %\s+'
    r'margin\s+(?P<margin>[+-]?[\d.]+) mm\s+(?P<ok>ok|NOT PLACED)\s*$'
)


def carton_row(line: str) -> CartonRow | None:
    """The row of one director console line, None for any other line."""
    m = _CARTON.match(line)
    if m is None:
        return None
    return CartonRow(
        package_id=m['id'],
        type=m['type'],
        layer=int(m['layer']),
        error_mm=float(m['err']),
        support_pct=float(m['sup']),
        margin_mm=float(m['margin']),
        placed=m['ok'] == 'ok',
    )


class EpisodeOutcome(_Result):
    run: RunInfo
    cartons_total: int
    cartons_done: int
    cartons: list[CartonRow]
    result: str | None = Field(description="the director's result line, e.g. '4/4 · SUCCESS'")
    episode: dict[str, Any] | None = Field(
        description='the episode line (episodes.jsonl: docs/telemetry.md), when written'
    )
    error: str | None = Field(description='why the run ended without a result, if it did')


class StopResult(_Result):
    stopped: bool = Field(description='whether a running episode was told to stop')
    message: str
    run: RunInfo


class CellState(_Result):
    run: RunInfo
    cartons_total: int
    cartons_done: int
    cartons: list[CartonRow] = Field(description="the episode's cartons so far, in order")
    held_carton: str | None = Field(description='the carton in the gripper, as last reported')
    last_result: dict[str, Any] | None = Field(description='the last episode line')
    last_failure: str | None = Field(description='the last failure or crash, if any')
    pallet_spec: dict[str, Any] | None
    limits: RunLimits


class RunSummary(_Result):
    id: str = Field(description="the run's folder name in the runs folder (get_run's run_id)")
    level: int | None
    task: str | None = Field(description='table, conveyor or truck')
    seeds: list[int] = Field(description='the seeds of its episode lines, in order')
    planner: str | None = Field(
        description='the planner, where known: the run was started by this server (its call '
        'log) or its lines record it'
    )
    episodes: int = Field(description='episode lines written (an open episode has none yet)')
    succeeded: int
    aborted: int
    cartons: int
    placed: int
    outcome: Literal['success', 'failure', 'aborted', 'open'] = Field(
        description='success: every episode succeeded; open: no episode line yet'
    )
    oracle: bool = Field(description='whether any stub (oracle) was in use')


class RunList(_Result):
    runs: list[RunSummary] = Field(description='newest first, at most `limit`')
    total: int = Field(description='runs in the runs folder')
    runs_dir: str
    source: str = Field(description='where the runs are read from')


class RunDetail(_Result):
    run: RunSummary
    episodes: list[dict[str, Any]] = Field(
        description='its episode lines (episodes.jsonl: docs/telemetry.md), in order'
    )
    run_dir: str
