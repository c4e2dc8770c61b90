"""tf2_msgs, control_msgs and ur_msgs, built by scripts/setup from the upstream sources pinned in
msgs/upstream-sources.tsv, hash exactly like Jazzy's (a pin whose interfaces drifted fails here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# Jazzy's RIHS01 hashes (ros2-standalone.md); they cover field names and types.
JAZZY = {
    'tf2_msgs/msg/TFMessage': 'RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087',
    'control_msgs/action/FollowJointTrajectory': 'RIHS01_738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6',
    'control_msgs/msg/JointTolerance': 'RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648',
    'control_msgs/msg/JointComponentTolerance': 'RIHS01_739ea7566931944d33830fa10f1bf5e7a7fbdc3172bce7a7eaac642bd6e3ffa4',
    'ur_msgs/srv/SetIO': 'RIHS01_5cb0c89ea4479b2947fccdac0f92dd6636c4b7fc3a312f79ec7fb68a1daa6cd5',
}


def _description(type_name: str) -> Path:
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        cand = Path(prefix) / 'share' / f'{type_name}.json'
        if prefix and cand.is_file():
            return cand
    pytest.fail(f'{type_name}.json not found on AMENT_PREFIX_PATH: run scripts/setup')


@pytest.mark.parametrize('type_name', sorted(JAZZY))
def test_generated_type_hash_equals_jazzy(type_name):
    doc = json.loads(_description(type_name).read_text())
    assert doc['type_hashes'][0]['type_name'] == type_name
    assert doc['type_hashes'][0]['hash_string'] == JAZZY[type_name]


def test_palletizer_msgs_imports_through_the_real_rosidl_build():
    from palletizer_msgs.action import Pick, Place
    from palletizer_msgs.msg import HeightMap
    from palletizer_msgs.srv import PlanPlacement

    assert PlanPlacement.Response.NO_CANDIDATE == 101
    assert Pick.Result.IK_UNREACHABLE == Place.Result.IK_UNREACHABLE == 301
    assert Place.Result.COLLISION == 303 and Place.Result.INVALID_REQUEST == 305
    hm = HeightMap(ny=2, nx=3, cells=[0.0] * 6, observed=[True] * 6)
    assert len(hm.cells) == 6
