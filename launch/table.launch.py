"""ros2 launch palletizer table.launch.py -- the node graph for a table level: level.launch.py with
source:=table (only table levels; the default is the first one)."""

from pathlib import Path

from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

from launch import LaunchDescription

LEVEL = str(Path(__file__).with_name('level.launch.py'))  # a path: --show-args lists its arguments


def generate_launch_description():
    only = {'source': 'table'}.items()
    return LaunchDescription(
        [IncludeLaunchDescription(PythonLaunchDescriptionSource(LEVEL), launch_arguments=only)]
    )
