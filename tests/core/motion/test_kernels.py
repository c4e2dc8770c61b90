"""The compiled motion kernels against their own Python definitions, on the arguments real
plans give them."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.warm import KERNELS, main, warm


@pytest.fixture(scope='module')
def recorded() -> dict:
    """The arguments of every kernel's first call from Python during the warm-up plans."""
    calls: dict = {}
    saved = {k.py_func.__name__: k for k in KERNELS}

    def recorder(name: str):
        def call(*args):
            calls.setdefault(name, args)
            return saved[name](*args)

        return call

    with pytest.MonkeyPatch.context() as mp:
        for name in saved:
            mp.setattr(kern, name, recorder(name))
        warm()
    return calls


def _same(a, b, path: str = '') -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f'{path}[{i}]')
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, path
    assert a.dtype == b.dtype or (a.dtype.kind in 'fi' and b.dtype.kind in 'fi'), path
    if a.dtype == bool:
        assert np.array_equal(a, b), path
    else:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=path)


@pytest.mark.parametrize('kernel', KERNELS, ids=lambda k: k.py_func.__name__)
def test_compiled_kernel_equals_its_python_definition(kernel, recorded) -> None:
    name = kernel.py_func.__name__
    assert name in recorded, f'the warm-up plans never called {name}'
    args = recorded[name]
    _same(kernel(*args), kernel.py_func(*args), name)


def test_every_kernel_is_compiled_for_one_argument_signature(recorded) -> None:
    # The wrappers hand each kernel the same types whatever their callers pass (contiguous
    # float64 arrays, Python scalars): one compilation each, none at a node's first plan.
    for k in KERNELS:
        assert len(k.signatures) == 1, (k.py_func.__name__, k.signatures)


def test_warm_up_entry_point_reports_success(capsys) -> None:
    assert main([]) == 0
    assert f'{len(KERNELS)} motion kernels ready' in capsys.readouterr().err


def test_topp_profile_respects_the_joint_limits_it_was_given() -> None:
    # A 0.6 m straight line through a slow joint: every knot speed within the joint speed
    # limit's share of the path, at rest at both ends, times strictly increasing.
    s = np.linspace(0.0, 0.6, 121)
    q = np.zeros((121, 6))
    q[:, 0] = 2.0 * s  # joint 1 moves 2 rad per metre
    v_lim = np.full(6, 1.0)
    dq, _, t_knot, sd, sdd = kern.topp(
        q, float(s[1] - s[0]), np.full(121, 10.0), 5.0, np.full(6, 4.0), v_lim, np.ones(121)
    )
    np.testing.assert_allclose(dq[:, 0], 2.0)
    assert sd[0] == 0.0 and sd[-1] == 0.0
    assert sd.max() == pytest.approx(0.5)  # 1 rad/s over 2 rad/m
    assert np.all(np.diff(t_knot) > 0)
    assert np.abs(sdd).max() <= 2.0 + 1e-9  # 4 rad/s^2 over 2 rad/m


def test_the_kernel_cache_is_cleared_when_any_kernel_source_changes(tmp_path):
    from palletizer.core.motion.warm import clear_stale_cache, sources_hash

    (tmp_path / 'kinematics.py').write_text('A = 1\n')
    (tmp_path / 'collision.py').write_text('B = 2\n')
    cache = tmp_path / '__pycache__'
    cache.mkdir()
    index = cache / 'collision.first_hit-10.py311.nbi'
    index.write_text('index')
    assert clear_stale_cache(tmp_path)  # no stamp yet: the cache is of unknown sources
    assert not index.exists()
    index.write_text('index')
    assert not clear_stale_cache(tmp_path)  # sources as stamped: the cache stays
    assert index.exists()
    before = sources_hash(tmp_path)
    (tmp_path / 'kinematics.py').write_text('A = 3\n')  # a callee in another file
    assert sources_hash(tmp_path) != before
    assert clear_stale_cache(tmp_path)
    assert not index.exists()
