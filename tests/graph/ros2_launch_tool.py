"""Where the ros2-launch checking tool is: PALLETIZER_ROS2_LAUNCH (.ci/run sets it), or beside
the repository. The project never imports or depends on it; tests that need it skip without it."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ros2_launch_tool() -> Path | None:
    env = os.environ.get('PALLETIZER_ROS2_LAUNCH')
    for cand in ([Path(env)] if env else []) + [ROOT.parent / 'shared/tools/ros2-launch/run']:
        if cand.is_file():
            return cand
    return None
