"""The gauge's ways of weighing the benches compare (configs/perception.yaml gauge):

- still: stop to weigh each carton, stop to zero after each place;
- lift: weigh on the lift where that fit converges (gauge.weigh_on_lift), still otherwise;
- track: that, and zero on the move back where that is certain enough (gauge.zero_on_move).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from palletizer.core.errors import InvalidValue

__all__ = ['WEIGHS', 'config_weigh', 'with_weigh']

WEIGHS = ('still', 'lift', 'track')


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
