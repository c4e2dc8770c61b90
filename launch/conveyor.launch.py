"""ros2 launch palletizer conveyor.launch.py -- the node graph for a conveyor level."""

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from palletizer.launcher.graph import LAUNCH_ARGUMENTS, launch_node_kwargs

from launch import LaunchDescription

SOURCE = 'conveyor'  # only conveyor levels; the default is the first one


def _required_exited(event, context):
    """A required node's exit ends the launch. A non-zero code (the director's for a failed or
    aborted run, or a node that died) makes `ros2 launch` exit 1: in Jazzy, LaunchService.run()
    returns non-zero only for an error raised in the launch, not for a process's exit code."""
    if event.returncode == 0:
        return [Shutdown(reason=f'required node {event.process_name} finished')]
    raise RuntimeError(f'required node {event.process_name} exited with code {event.returncode}')


def _nodes(context):
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in LAUNCH_ARGUMENTS}
    nodes = []
    for kw in launch_node_kwargs(values, source=SOURCE):
        # A required node (the director) ends the launch when it exits, as the launcher does,
        # and its exit code decides the launch's (docs/interfaces.md §9.5).
        required = kw.pop('required')
        nodes.append(Node(**kw, on_exit=_required_exited if required else None))
    return nodes


def generate_launch_description():
    args = [
        DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
        for a in LAUNCH_ARGUMENTS
    ]
    return LaunchDescription([*args, OpaqueFunction(function=_nodes)])
