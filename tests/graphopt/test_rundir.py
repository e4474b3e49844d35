from __future__ import annotations

import pytest

from graphopt import rundir


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """Ctrl-C as in an interactive process, however the suite was launched: a background job
    (``cmd &``, ``nohup``) starts with SIGINT ignored, and Python then leaves it ignored."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_run_dirs_are_numbered_and_checked(tmp_path):
    a = rundir.new_run_dir(tmp_path, "placement", "go")
    b = rundir.new_run_dir(tmp_path, "placement", "go")
    assert (a.name, b.name) == ("go_1", "go_2") and (a / "checkpoints").is_dir()
    with pytest.raises(ValueError, match="may only contain"):
        rundir.new_run_dir(tmp_path, "placement", "bad name/")
    with pytest.raises(ValueError, match="does not exist"):
        rundir.check_run_dir(tmp_path / "placement" / "go_9")
    with pytest.raises(ValueError, match="is not a graphopt run"):
        rundir.check_run_dir(a)
    (a / rundir.CONFIG_FILE).write_text("task: placement\n")
    with pytest.raises(ValueError, match="holds no model yet"):
        rundir.check_run_dir(a)


def test_state_and_metrics_append(tmp_path):
    rundir.write_state(tmp_path, status="running", timesteps=5)
    rundir.write_state(tmp_path, status="interrupted")
    assert rundir.read_state(tmp_path) == {"status": "interrupted", "timesteps": 5}
    log = rundir.MetricsLog(tmp_path)
    log.write(timesteps=1, kind="train", reward_mean=0.5)
    rundir.MetricsLog(tmp_path).write(timesteps=2, kind="val")  # reopening appends
    lines = (tmp_path / rundir.METRICS).read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("timesteps,") and lines[2].startswith("2,")
    assert log.last_wall_seconds() == 0.0  # no row has a wall time
    log.write(timesteps=3, kind="train", wall_seconds=1.5)
    log.write(timesteps=3, kind="val", wall_seconds=2.25)
    assert rundir.MetricsLog(tmp_path).last_wall_seconds() == 2.25


def test_uninterrupted_holds_ctrl_c_until_the_block_is_done(tmp_path):
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    before = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt), rundir.uninterrupted():
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of a write
        (tmp_path / "file").write_text("complete")
        done.append(True)
    assert done == [True] and (tmp_path / "file").read_text() == "complete"
    assert signal.getsignal(signal.SIGINT) is before  # the previous handler is back
    with rundir.uninterrupted():  # no Ctrl-C: nothing raised
        pass


def test_write_atomic_finishes_the_file_before_ctrl_c(tmp_path):
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")

    def write(path):
        assert path.name.endswith(".tmp.pt")  # written under a temporary name
        os.kill(os.getpid(), signal.SIGINT)
        path.write_text("model")

    with pytest.raises(KeyboardInterrupt):
        rundir.write_atomic(tmp_path / "checkpoints" / "m.pt", write)
    assert (tmp_path / "checkpoints" / "m.pt").read_text() == "model"
    assert not list(tmp_path.rglob("*.tmp.pt"))
    # during training the held Ctrl-C goes to graceful_stop: a stop request, no exception
    with rundir.graceful_stop() as stop:
        rundir.write_atomic(tmp_path / "n.pt", write)
        assert stop.requested
    assert (tmp_path / "n.pt").read_text() == "model"


def test_a_run_of_sb3_zips_is_refused_with_the_fix(tmp_path):
    run = rundir.new_run_dir(tmp_path, "placement", "old")
    (run / rundir.CONFIG_FILE).write_text("task: placement\n")
    (run / "best_model.zip").write_bytes(b"PK")  # never opened, so any content will do
    (run / "checkpoints" / "last.zip").write_bytes(b"PK")
    for check in (rundir.check_run_dir, rundir.best_model_path):
        with pytest.raises(ValueError) as e:
            check(run)
        message = str(e.value)
        assert "\n" not in message and f"run {run} holds only an SB3 .zip model" in message
        assert "best_model.zip, checkpoints/last.zip" in message
        assert "can execute code" in message and "retrain the run" in message
    rundir.check_run_dir(run, need_model=False)  # still a run (resume says why it cannot go on)
    (run / rundir.BEST).write_bytes(b"")  # weights next to the zips: those are what is used
    assert rundir.best_model_path(run) == run / "best_model.pt"


def test_first_ctrl_c_requests_a_stop_and_the_second_raises(capsys):
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), rundir.graceful_stop("stopping soon") as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested and "graphopt: stopping soon" in capsys.readouterr().err
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C stops at once
        pytest.fail("the second Ctrl-C did not raise")
    assert signal.getsignal(signal.SIGINT) is before
    with rundir.graceful_stop() as stop:  # no Ctrl-C: nothing requested, nothing raised
        pass
    assert not stop.requested and signal.getsignal(signal.SIGINT) is before


def test_is_interrupt_sees_a_ctrl_c_behind_another_error():
    def numba_like():  # what numba's dispatcher reports when Ctrl-C lands in a compiled call
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from e

    with pytest.raises(SystemError) as info:
        numba_like()
    assert rundir.is_interrupt(info.value) and rundir.is_interrupt(KeyboardInterrupt())
    assert not rundir.is_interrupt(ValueError("bad"))
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("handled, then a new error") from None  # the context is hidden
    except RuntimeError as e:
        assert not rundir.is_interrupt(e)
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("while handling Ctrl-C")  # noqa: B904 (the implicit context is the point)
    except RuntimeError as e:
        assert rundir.is_interrupt(e)


def test_ignored_ctrl_c_stays_ignored():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup or in a background job
    try:
        with rundir.graceful_stop() as stop:
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert not stop.requested
        with rundir.uninterrupted():
            signal.raise_signal(signal.SIGINT)  # ignored: nothing raised afterwards either
    finally:
        signal.signal(signal.SIGINT, before)


def test_sigterm_requests_a_stop_like_ctrl_c(capsys):
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    before = signal.getsignal(signal.SIGTERM)
    assert before == signal.SIG_DFL  # as in a fresh process: SIGTERM would end it unsaved
    with pytest.raises(KeyboardInterrupt), rundir.graceful_stop() as stop:
        os.kill(os.getpid(), signal.SIGTERM)  # kill, a scheduler's preemption
        assert stop.requested and "SIGTERM again to stop at once" in capsys.readouterr().err
        os.kill(os.getpid(), signal.SIGINT)  # either signal, a second time, stops at once
        pytest.fail("the second signal did not raise")
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_sigterm_handler_of_the_application_is_left_alone():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    seen = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with rundir.graceful_stop() as stop:
            assert signal.getsignal(signal.SIGINT) != signal.default_int_handler
            signal.raise_signal(signal.SIGTERM)
        assert seen == [signal.SIGTERM] and not stop.requested
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_ignored_ctrl_c_stays_ignored():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup; the fixture restores it
    with rundir.graceful_stop() as stop:
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
    assert not stop.requested
