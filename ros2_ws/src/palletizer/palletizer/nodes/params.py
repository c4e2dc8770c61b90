"""Parameter declaration shared by the nodes: one parameter with its description, read once."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

__all__ = ['declare']


def declare(node: Node, name: str, default: Any, text: str, read_only: bool = False) -> Any:
    """Declare parameter `name` on `node` with `default` and the description `text`; its value.

    `read_only`: the parameter cannot be set once the node runs (ParameterDescriptor.read_only).
    """
    desc = ParameterDescriptor(description=text, read_only=read_only)
    return node.declare_parameter(name, default, desc).value
