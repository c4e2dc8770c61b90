"""Small helpers to build TransformStamped messages from 4x4 transforms."""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped

__all__ = ['quat_from_matrix', 'transform_msg']


def quat_from_matrix(R: np.ndarray) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation matrix."""
    m = np.asarray(R, dtype=float)
    t = m[0, 0] + m[1, 1] + m[2, 2]
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        return ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4)
    i = int(np.argmax([m[0, 0], m[1, 1], m[2, 2]]))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
    q = [0.0, 0.0, 0.0, 0.0]
    q[i] = s / 4
    q[j] = (m[j, i] + m[i, j]) / s
    q[k] = (m[k, i] + m[i, k]) / s
    q[3] = (m[k, j] - m[j, k]) / s
    return (q[0], q[1], q[2], q[3])


def transform_msg(stamp: Time, parent: str, child: str, T: np.ndarray) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (
        float(v) for v in T[:3, 3]
    )
    x, y, z, w = quat_from_matrix(T[:3, :3])
    msg.transform.rotation.x, msg.transform.rotation.y = float(x), float(y)
    msg.transform.rotation.z, msg.transform.rotation.w = float(z), float(w)
    return msg
