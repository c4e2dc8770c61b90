"""The emulated UR controller's status: a protective stop stops the program and refuses motion
until it is unlocked (not within 5 s) and the program played again; the dashboard's answers."""

from __future__ import annotations

from palletizer.bridge.ur_status import (
    UNLOCK_AFTER_S,
    RobotMode,
    SafetyMode,
    UrStatus,
)


def test_a_fresh_controller_runs_the_program_and_accepts_motion():
    s = UrStatus()
    assert (s.robot_mode, s.safety_mode, s.program_running) == (
        RobotMode.RUNNING,
        SafetyMode.NORMAL,
        True,
    )
    assert s.motion_refused() == '' and s.program_state() == 'PLAYING'


def test_a_protective_stop_needs_an_unlock_after_5_s_and_then_play():
    s = UrStatus()
    s.protective_stop(now=10.0)
    assert s.motion_refused() == 'safety mode is PROTECTIVE_STOP'
    assert s.program_state() == 'STOPPED'
    assert s.play() == (False, 'Failed to execute: play')
    ok, text = s.unlock_protective_stop(now=10.0 + UNLOCK_AFTER_S - 0.1)
    assert not ok and 'until 5s after occurrence' in text
    assert s.unlock_protective_stop(now=10.0 + UNLOCK_AFTER_S) == (
        True,
        'Protective stop releasing',
    )
    assert s.motion_refused() == 'the External Control program is not running'
    assert s.play() == (True, 'Starting program') and s.motion_refused() == ''
    assert s.unlock_protective_stop(now=20.0) == (False, 'Robot is not in protective stop')


def test_stop_and_play_switch_the_program_and_motion_with_it():
    s = UrStatus()
    assert s.stop() == (True, 'Stopped')
    assert s.motion_refused() == 'the External Control program is not running'
    s.robot_mode = RobotMode.IDLE
    assert s.motion_refused() == 'robot mode is IDLE' and not s.play()[0]
