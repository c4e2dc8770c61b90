"""Why an episode closed by a stop was stopped: the cause the episode line records."""

from __future__ import annotations

import os

from palletizer.core.ports import STOP_REASON_ENV, stop_cause


def test_the_launchers_reason_is_the_cause(tmp_path, monkeypatch):
    reason = tmp_path / 'stop_reason'
    reason.write_text('trajectory_executor exited with code -9 and is not respawned\n')
    monkeypatch.setenv(STOP_REASON_ENV, str(reason))
    assert stop_cause(os.getppid()) == (
        'the run was stopped: trajectory_executor exited with code -9 and is not respawned'
    )


def test_no_reason_and_another_parent_means_the_launcher_died(tmp_path, monkeypatch):
    monkeypatch.setenv(STOP_REASON_ENV, str(tmp_path / 'stop_reason'))  # never written
    assert stop_cause(os.getppid() + 1) == 'the run was stopped: its launcher died'


def test_no_reason_and_the_same_parent_means_a_signal_from_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv(STOP_REASON_ENV, str(tmp_path / 'stop_reason'))
    assert 'signal from outside its launcher' in stop_cause(os.getppid())
    monkeypatch.delenv(STOP_REASON_ENV)
    assert 'signal from outside its launcher' in stop_cause(None)
