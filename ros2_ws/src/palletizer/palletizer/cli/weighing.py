"""The ways of running a carton cycle the benches compare.

The gauge's ways of weighing (configs/perception.yaml gauge), WEIGHS:

- still: stop to weigh each carton, stop to zero after each place;
- lift: weigh on the lift where that fit converges (gauge.weigh_on_lift), still otherwise;
- track: that, and zero on the move back where that is certain enough (gauge.zero_on_move).

A way (`scripts/bench throughput --weigh`) is one of those, then any of LEVERS joined to it
with `+` (`track+joint+early`):

- joint: the cross between a plan's vertical rise and descent as a line in joint space
  (configs/cell.yaml motion.transit, core/motion/joint_transit.py);
- early: look for the next carton as soon as a place is done and wait over it
  (configs/cell.yaml episode.detect_early, core/episode.py detect_next).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from palletizer.core.errors import InvalidValue

__all__ = ['LEVERS', 'WEIGHS', 'check_way', 'config_way', 'config_weigh', 'with_way', 'with_weigh']

WEIGHS = ('still', 'lift', 'track')
LEVERS = ('joint', 'early')


def with_weigh(cfg: Any, weigh: str) -> Any:
    """The config (core.config.Config) with the gauge weighing `weigh` (one of WEIGHS)."""
    if weigh not in WEIGHS:
        raise InvalidValue(f'weigh {weigh!r}; expected one of {", ".join(WEIGHS)}')
    perception = cfg.perception
    gauge = replace(
        perception.gauge, weigh_on_lift=weigh in ('lift', 'track'), zero_on_move=weigh == 'track'
    )
    return replace(cfg, perception=replace(perception, gauge=gauge))


def config_weigh(cfg: Any) -> str:
    """The way of weighing the config's gauge sets: track (zero_on_move, with the weigh on the
    lift it goes with), lift (weigh_on_lift) or still."""
    g = cfg.perception.gauge
    return 'track' if g.zero_on_move else 'lift' if g.weigh_on_lift else 'still'


def check_way(way: str) -> str:
    """The way `way` written canonically (its levers in LEVERS order); InvalidValue naming
    what is allowed when it is not a way of weighing followed by distinct levers."""
    weigh, *levers = way.split('+')
    allowed = f'one of {", ".join(WEIGHS)}, then any of {", ".join(LEVERS)}, joined by +'
    if weigh not in WEIGHS:
        raise InvalidValue(f'way {way!r}: weigh {weigh!r}; expected {allowed}')
    for lever in levers:
        if lever not in LEVERS:
            raise InvalidValue(f'way {way!r}: {lever!r}; expected {allowed}')
    if len(set(levers)) != len(levers):
        raise InvalidValue(f'way {way!r} names a lever twice; expected {allowed}')
    return '+'.join([weigh, *(lv for lv in LEVERS if lv in levers)])


def with_way(cfg: Any, way: str) -> Any:
    """The config with the way `way` (check_way): its weighing, and each lever on, the others
    off."""
    weigh, *levers = check_way(way).split('+')
    cfg = with_weigh(cfg, weigh)
    cell = cfg.cell
    motion = replace(cell.motion, transit='joint' if 'joint' in levers else 'cartesian')
    episode = replace(cell.episode, detect_early='early' in levers)
    return replace(cfg, cell=replace(cell, motion=motion, episode=episode))


def config_way(cfg: Any) -> str:
    """The way the config runs: its weighing and the levers it has on."""
    levers = {'joint': cfg.cell.motion.transit == 'joint', 'early': cfg.cell.episode.detect_early}
    return '+'.join([config_weigh(cfg), *(lv for lv in LEVERS if levers[lv])])
