"""Compiled inner loops of the motion math (numba), by domain: timing (the time-optimal
phase-plane passes, the jerk-limiting filter, profile evaluation, the sample limit check),
kinematics (the analytic IK and its branches, forward kinematics), collision (the swept-volume
test, the wrist against the mount, the arm against static boxes) and blending (the Hermite joint
interpolation, the blended Cartesian path).

Each kernel is a plain Python function over numpy arrays, compiled on first use and cached on
disk (`scripts/setup` compiles them once, so nodes start warm). They run sample by sample where
numpy needs dozens of whole-array passes and their temporaries: a checked pick + place plan
took 10 ms in numpy, most of it per-call overhead. The arithmetic is written in the same order
as the numpy it replaced (no fast-math: IEEE results, no reassociation), and each kernel's
Python definition stays callable as `kernel.py_func`; the tests hold both to the same result.

numba's disk cache notices a change only in the file that defines a kernel, not in a kernel it
calls from another file (collision calls kinematics' transforms): `core.motion.warm`, which
`scripts/setup` runs, clears this package's cache whenever any of its sources changed.
Callers use the kernels through this package (`_kernels.topp`), so a test can swap one.
"""

from __future__ import annotations

from palletizer.core.motion._kernels.blending import blend_path, hermite_joints
from palletizer.core.motion._kernels.collision import (
    arm_box_hits,
    first_hit,
    max_under,
    wrists_near_mount,
)
from palletizer.core.motion._kernels.kinematics import (
    fk_flange,
    follow_branch,
    ik_branches,
    nearest_in_family,
)
from palletizer.core.motion._kernels.timing import (
    box_smooth,
    derivative,
    evaluate_profile,
    over_limits,
    topp,
)

__all__ = [
    'arm_box_hits',
    'blend_path',
    'box_smooth',
    'derivative',
    'evaluate_profile',
    'first_hit',
    'fk_flange',
    'follow_branch',
    'hermite_joints',
    'ik_branches',
    'max_under',
    'nearest_in_family',
    'over_limits',
    'topp',
    'wrists_near_mount',
]
