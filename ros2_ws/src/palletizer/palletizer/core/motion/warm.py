"""Compile the motion kernels (palletizer.core.motion._kernels) into numba's on-disk cache.

`python -m palletizer.core.motion.warm` runs a pick and a place under every timing, against a
height field, static boxes and a carried carton, and the reach model: every kernel with the
argument types the planner gives it. `scripts/setup` runs it, so a node's first plan loads
compiled code instead of compiling it (~15-20 s on 2 cores); when the cache is current it
takes about a second.

numba checks a cached kernel against its own file only; a kernel that calls one from another
file of the package would keep the old callee. So the cache of the whole kernel package is
cleared first whenever any of its sources changed (a hash of them is kept beside the cache).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from palletizer.core.contracts import EUR_DECK_Z
from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.collision import AABB, CollisionWorld, HeightField
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import HOME_Q, tool_down
from palletizer.core.motion.params import TIMINGS, MotionParams
from palletizer.core.motion.planner import CartonPose, MotionPlanner

__all__ = ['KERNELS', 'main', 'warm']

# Every compiled kernel the motion code calls (the helpers they call are compiled with them).
KERNELS = (
    kern.blend_path,
    kern.box_smooth,
    kern.evaluate_profile,
    kern.first_hit,
    kern.fk_flange,
    kern.follow_branch,
    kern.hermite_joints,
    kern.ik_branches,
    kern.max_under,
    kern.nearest_in_family,
    kern.over_limits,
    kern.topp,
    kern.wrists_near_mount,
    kern.arm_box_hits,
)


_KERNEL_DIR = Path(kern.__file__).parent
_STAMP = 'palletizer-sources.sha256'


def sources_hash(folder: Path = _KERNEL_DIR) -> str:
    """The sha256 of the kernel package's sources, in name order."""
    h = hashlib.sha256()
    for path in sorted(folder.glob('*.py')):
        h.update(path.name.encode() + b'\0' + path.read_bytes() + b'\0')
    return h.hexdigest()


def clear_stale_cache(folder: Path = _KERNEL_DIR) -> bool:
    """Remove numba's cache of the kernel package when its sources changed since it was made.

    Returns True when it cleared something. numba writes its index (.nbi) and code (.nbc) files
    to the package's __pycache__ (NUMBA_CACHE_DIR, when set, moves them: then this is a no-op).
    """
    cache = folder / '__pycache__'
    stamp = cache / _STAMP
    current = sources_hash(folder)
    if stamp.is_file() and stamp.read_text().strip() == current:
        return False
    stale = [*cache.glob('*.nbi'), *cache.glob('*.nbc')] if cache.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    cache.mkdir(exist_ok=True)
    stamp.write_text(current + '\n')
    return bool(stale)


def warm() -> float:
    """Plan with every kernel (compiling or loading each); returns the seconds it took."""
    t0 = time.perf_counter()
    heights = np.zeros((80, 120))
    heights[:, :30] = 0.4
    table = AABB((-0.56, -1.14, 0.0), (0.16, -0.46, 0.58), 'pick_table')
    field = HeightField(heights)
    world = CollisionWorld(field, (table,), arm_boxes=(table,))
    pick = CartonPose(-0.20, -0.80, 0.58 + 0.1, 0.1, (0.4, 0.3, 0.2))
    place = CartonPose(0.85, 0.1, EUR_DECK_Z + 0.1, np.pi / 2, (0.4, 0.3, 0.2))
    for timing in TIMINGS:
        planner = MotionPlanner(params=MotionParams(timing=timing))
        a = planner.plan_pick(np.array(HOME_Q), pick, world, mass=5.0)
        if not a.ok or a.q_end is None or a.grasp is None:
            raise MotionError(f'warm-up pick failed ({timing}): {a.cause} {a.message}')
        b = planner.plan_place(a.q_end, place, a.grasp, world)
        if not b.ok:
            raise MotionError(f'warm-up place failed ({timing}): {b.cause} {b.message}')
    field.max_under(0.5, 0.0, 0.1, 0.1, 0.3)
    # The nearest IK in the working family (the reach limits of a plan's second try, parks).
    planner.kin.ik_nearest(tool_down(0.85, 0.1, 0.9, 0.0), np.array(HOME_Q))
    # The reach model: every IK branch and the wrist check on a batch.
    from palletizer.core.motion.reach import AnalyticReach

    AnalyticReach().reachable(np.array([0.8]), np.array([0.0]), np.array([0.6]), np.zeros(1))
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m palletizer.core.motion.warm', description=__doc__)
    ap.parse_args(argv)
    if clear_stale_cache():
        print('[warm] kernel sources changed: cleared their compiled cache', file=sys.stderr)
    seconds = warm()
    # KERNELS are numba dispatchers (typed as the functions they compile): what each compiled.
    dispatchers: list[Any] = list(KERNELS)
    missing = [k.py_func.__name__ for k in dispatchers if not k.signatures]
    if missing:
        print(f'[warm] kernels not exercised: {", ".join(missing)}', file=sys.stderr)
        return 1
    print(f'[warm] {len(KERNELS)} motion kernels ready in {seconds:.1f} s', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
