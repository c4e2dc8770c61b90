"""ros2 launch palletizer level.launch.py level:=23 -- the whole node graph for one level.

The one launch description of the graph: table, conveyor and truck.launch.py include it with
source:= set, as the UR driver's per-robot launch files include its ur_control.launch.py.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from palletizer.launcher.graph import LAUNCH_ARGUMENTS, launch_node_kwargs, required_node_exited

from launch import LaunchDescription


def _nodes(context):
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in LAUNCH_ARGUMENTS}
    source = LaunchConfiguration('source').perform(context) or None
    nodes = []
    for kw in launch_node_kwargs(values, source=source):
        # A required node (the director) ends the launch; its exit code decides the launch's.
        on_exit = required_node_exited if kw.pop('required') else None
        nodes.append(Node(**kw, on_exit=on_exit))
    return nodes


def generate_launch_description():
    args = [
        DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
        for a in LAUNCH_ARGUMENTS
    ]
    only = DeclareLaunchArgument(
        'source',
        default_value='',
        description="table | conveyor | truck: only that source's levels, the default level "
        'its first; empty: any level',
    )
    return LaunchDescription([*args, only, OpaqueFunction(function=_nodes)])
