"""rviz/palletizer.rviz against a live graph: every display's topic exists with the message type
the display takes, and every frame it names (and every marker's frame) is in the TF tree."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
RVIZ = HERE.parents[1] / 'rviz' / 'palletizer.rviz'
# The message type each RViz display class subscribes to.
DISPLAY_TYPES = {
    'rviz_default_plugins/RobotModel': 'std_msgs/msg/String',
    'rviz_default_plugins/MarkerArray': 'visualization_msgs/msg/MarkerArray',
    'rviz_default_plugins/PointCloud2': 'sensor_msgs/msg/PointCloud2',
    'rviz_default_plugins/Image': 'sensor_msgs/msg/Image',
}


def _config() -> dict:
    return yaml.safe_load(RVIZ.read_text())


def _topics(cfg: dict) -> dict[str, str]:
    out = {}
    for d in cfg['Visualization Manager']['Displays']:
        topic = d.get('Topic') or d.get('Description Topic')
        if topic is not None:
            out[topic['Value']] = DISPLAY_TYPES[d['Class']]
    return out


def _frames(cfg: dict) -> set[str]:
    vm = cfg['Visualization Manager']
    out = {vm['Global Options']['Fixed Frame'], vm['Views']['Current']['Target Frame']}
    return out | {d['Reference Frame'] for d in vm['Displays'] if 'Reference Frame' in d}


def test_every_display_of_the_configuration_is_known_here():
    cfg = _config()
    classes = [d['Class'] for d in cfg['Visualization Manager']['Displays']]
    assert set(classes) - {'rviz_default_plugins/Grid', 'rviz_default_plugins/TF'} <= set(
        DISPLAY_TYPES
    )
    assert set(_topics(cfg)) == {
        '/robot_description',
        '/palletizer/markers',
        '/palletizer/plan_markers',
        '/palletizer/points',
        '/cameras/station/color/image_raw',
    }


@pytest.fixture(scope='module')
def live(level_episode) -> dict:
    """The shared level-11 episode (tests/graph/conftest.py), probed while it ran."""
    return level_episode


def test_every_display_topic_is_live_with_the_displays_type(live):
    for topic, msgtype in _topics(_config()).items():
        assert topic in live['topics'], f'{topic} not on the graph\n{live["log"][-3000:]}'
        assert live['topics'][topic] == [msgtype], topic
    assert live['seen'] == {'image': 1, 'points': 1}
    # The Foxglove layout's cycle-time plot: the sim time from one carton's place to the next.
    assert live['cycles'] and all(2.0 < c < 60.0 for c in live['cycles']), live['cycles']


def test_every_frame_of_the_configuration_and_the_markers_is_in_the_tf_tree(live):
    frames = set(live['frames'])
    assert _frames(_config()) <= frames
    assert set(live['markers']['frames']) <= frames
    assert {'base_link', 'tool0', 'tcp', 'station_optical'} <= frames
    assert set(live['markers']['ns']) >= {'pallet', 'planned', 'actual', 'cog', 'heightmap'}
    assert set(live['markers']['held_frames']) == {'tcp'}  # the carton rode on the tool
    assert set(live['plan']['frames']) <= frames
    assert set(live['plan']['ns']) >= {'candidates', 'chosen', 'cog_measured', 'support'}
