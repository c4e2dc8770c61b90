"""ros2 launch palletizer truck.launch.py -- the node graph for a truck level."""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from palletizer.launcher.graph import LAUNCH_ARGUMENTS, launch_node_kwargs, required_node_exited

from launch import LaunchDescription

SOURCE = 'truck'  # only truck levels; the default is the first one


def _nodes(context):
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in LAUNCH_ARGUMENTS}
    nodes = []
    for kw in launch_node_kwargs(values, source=SOURCE):
        # A required node (the director) ends the launch; its exit code decides the launch's.
        on_exit = required_node_exited if kw.pop('required') else None
        nodes.append(Node(**kw, on_exit=on_exit))
    return nodes


def generate_launch_description():
    args = [
        DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
        for a in LAUNCH_ARGUMENTS
    ]
    return LaunchDescription([*args, OpaqueFunction(function=_nodes)])
