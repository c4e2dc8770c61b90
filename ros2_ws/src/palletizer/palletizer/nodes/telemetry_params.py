"""The telemetry node's parameters: their names, defaults and descriptions, read once at start.

`declare_params` declares them on the node; `refuse_fixed` is its parameter callback: the
run's folder, mode and free-space floor cannot change while it runs. The recorder's
configuration (telemetry/recorder.py) follows from them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from palletizer.core.config import TelemetryConfig
from palletizer.nodes.params import declare
from palletizer.telemetry import TOPICS, RecorderConfig, TelemetryMode, run_stamp

__all__ = ['FIXED', 'TelemetryParams', 'declare_params', 'refuse_fixed']

FIXED = ('mode', 'runs_dir', 'run_stamp', 'tag', 'min_free_mb')


@dataclass(frozen=True)
class TelemetryParams:
    """The values of the telemetry node's parameters."""

    mode: TelemetryMode
    runs_dir: str  # folder of run directories (relative: cwd)
    stamp: str  # YYYYmmdd-HHMMSS of the run; empty = wall clock at start
    tag: str  # suffix of the run directory name
    min_free_mb: float  # [MB] free space the runs folder needs
    end_wait_s: float  # [s] how long end_episode waits for what is still in flight

    def recorder_config(self, cfg: TelemetryConfig) -> RecorderConfig:
        """The recorder's run folder, free-space floor, bag topics and outbox."""
        # The run stamp is the one wall-clock read: it names the directory, nothing else.
        topics = {t: m for t, m in TOPICS.items() if t in cfg.bag.topics}
        return RecorderConfig(
            runs_dir=Path(os.path.expanduser(self.runs_dir)),
            stamp=self.stamp or run_stamp(datetime.now()),
            tag=self.tag,
            min_free_bytes=int(self.min_free_mb * 1e6),
            bag_topics=topics if cfg.bag.enabled else None,
            outbox=self.mode in (TelemetryMode.postgres, TelemetryMode.supabase),
        )


def declare_params(node: Node, cfg: TelemetryConfig) -> TelemetryParams:
    """Declare the telemetry node's parameters on `node` (defaults from `cfg`) and read them."""
    mode = TelemetryMode.parse(
        declare(node, 'mode', cfg.mode.value, 'disk | postgres | supabase | off'), 'mode'
    )
    runs_dir = declare(node, 'runs_dir', cfg.runs_dir, 'folder of run directories (relative: cwd)')
    stamp = declare(
        node, 'run_stamp', '', 'YYYYmmdd-HHMMSS of the run; empty = wall clock at start'
    )
    tag = declare(node, 'tag', 'pallet', 'suffix of the run directory name')
    min_free_mb = float(
        declare(node, 'min_free_mb', cfg.min_free_mb, '[MB] free space the runs folder needs')
    )
    # The wait ends as soon as everything is in; its length matters only under load, when
    # the last photo's two frames (~1 MB each) reached this node more than 2 s after the
    # director's end_episode (level 31 -n 3 on two busy cores lost a final photo at 2 s).
    end_wait_s = float(
        declare(
            node,
            'end_wait_s',
            10.0,
            '[s] how long end_episode waits for events and photo frames still in flight',
        )
    )
    return TelemetryParams(mode, runs_dir, stamp, tag, min_free_mb, end_wait_s)


def refuse_fixed(params: list[Parameter]) -> SetParametersResult:
    """The node's parameter callback: a parameter of FIXED cannot be set while the run lasts."""
    for p in params:
        if p.name in FIXED:
            return SetParametersResult(
                successful=False, reason=f'{p.name} is fixed for the run; restart the node'
            )
    return SetParametersResult(successful=True)
