"""Stream rates: physics steps per published sample."""

from __future__ import annotations

import pytest
from palletizer.bridge import StepStream, steps_per_sample


@pytest.mark.parametrize(
    ('rate_hz', 'steps'), [(50.0, 10), (250.0, 2), (500.0, 1), (2000.0, 1), (120.0, 4)]
)
def test_steps_per_sample_rounds_to_whole_physics_steps(rate_hz, steps):
    assert steps_per_sample(rate_hz, 0.002) == steps


def test_steps_per_sample_rejects_non_positive_rates():
    with pytest.raises(ValueError, match=r'rate_hz = 0.0, timestep = 0.002; expected both > 0'):
        steps_per_sample(0.0, 0.002)


def test_step_stream_emits_every_n_calls():
    seen = []
    s = StepStream(lambda: seen.append(1), every=2)
    for _ in range(9):
        s(None, None)
    assert len(seen) == 4 and s.emitted == 4
