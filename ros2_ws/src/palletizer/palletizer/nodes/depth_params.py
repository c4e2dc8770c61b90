"""The depth-fusion node's parameters: their names, defaults and descriptions, read once at start.

`declare_params` declares them on the node, every one read-only, and refuses a mode that is
neither `cameras` nor `oracle`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from rclpy.node import Node

from palletizer.core.vocab import PerceptionMode
from palletizer.nodes.camera_inputs import DEFAULT_TOPICS
from palletizer.nodes.params import declare

__all__ = ['MODES', 'DepthParams', 'declare_params']

MODES = PerceptionMode.names()


@dataclass(frozen=True)
class DepthParams:
    """The values of the depth-fusion node's parameters."""

    map_mode: str  # cameras | oracle (ground truth: flags the run)
    detector_mode: str  # cameras | oracle
    level: int  # its source chooses the pick cameras; 0 = the default level
    truth_service: str  # the cell's GroundTruth, which the oracle modes read
    capture_service: str  # asks the cell for frames; empty = streamed
    frames_timeout_s: float  # [s, wall] wait for the frames of one capture
    topics: dict[str, str]  # depth, color and info topic patterns with {camera}


def declare_params(node: Node) -> DepthParams:
    """Declare the depth-fusion node's parameters on `node` and read them; SystemExit for an
    unknown mode."""
    param = functools.partial(declare, node, read_only=True)
    map_mode = param('map', 'cameras', 'cameras | oracle (ground truth: flags the run)')
    detector_mode = param('detector', 'cameras', 'cameras | oracle (ground truth: flags the run)')
    for name, value in (('map', map_mode), ('detector', detector_mode)):
        if value not in MODES:
            raise SystemExit(
                f'depth_fusion: {name}:={value!r}; expected one of {", ".join(MODES)}'
            )
    level = int(param('level', 0, 'level id: its source chooses the pick cameras; 0 = default'))
    truth = param('ground_truth_service', '/cell_bridge/ground_truth', 'the oracle reads it')
    capture = param(
        'capture_service', '/cell_bridge/capture', 'asks the cell for frames; empty = streamed'
    )
    frames_timeout_s = float(
        param('frames_timeout_s', 10.0, 'wait for the frames of one capture [s, wall]')
    )
    topics = {
        k: param(f'{k}_topic', v, f'{k} topic pattern; {{camera}} stands for the camera')
        for k, v in DEFAULT_TOPICS.items()
    }
    return DepthParams(map_mode, detector_mode, level, truth, capture, frames_timeout_s, topics)
