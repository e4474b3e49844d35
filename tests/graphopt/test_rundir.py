from __future__ import annotations

import os

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


def test_a_failed_write_atomic_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("old")

    def half(tmp):
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(ValueError, match="cannot write '.*c.yaml': No space left"):
        rundir.write_atomic(path, half)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


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


# ---------------------------------------------------------------------------- output paths


def test_output_paths_are_checked_before_any_work(tmp_path):
    from pathlib import Path

    blocker = tmp_path / "F"
    blocker.write_text("a regular file")
    for path, directory in (
        (blocker / "out.json", False),
        (blocker / "deeper" / "out.json", False),
        (blocker / "sub", True),
    ):
        with pytest.raises(ValueError) as e:
            rundir.check_output_path(path, "--out", directory=directory)
        message = str(e.value)
        assert "\n" not in message and f"--out {str(path)!r}" in message
        assert f"{str(blocker)!r} is a file, not a directory" in message
    with pytest.raises(ValueError, match=r"'.*F' is a file, not a directory; give a directory"):
        rundir.check_output_path(blocker, "--runs-dir", directory=True)
    with pytest.raises(ValueError, match="is a directory; give the name of a file"):
        rundir.check_output_path(tmp_path, "--json")
    # what can be created passes, and nothing is created by the check
    assert rundir.check_output_path(tmp_path / "a" / "b.json", "--json") == tmp_path / "a/b.json"
    rundir.check_output_path(tmp_path / "new" / "dir", "--out", directory=True)
    rundir.check_output_path(blocker, "--json")  # an existing file is replaced
    rundir.check_output_path(Path("relative.json"), "--json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_output_path_in_a_read_only_directory_is_refused(tmp_path):
    locked_dir = tmp_path / "ro"
    locked_dir.mkdir()
    locked_dir.chmod(0o555)
    try:
        with pytest.raises(ValueError, match=r"directory '.*ro' is not writable"):
            rundir.check_output_path(locked_dir / "x" / "out.json", "--json")
    finally:
        locked_dir.chmod(0o755)


def test_run_names_and_roots_are_checked_before_a_directory_is_made(tmp_path):
    (tmp_path / "F").write_text("")
    with pytest.raises(ValueError, match="F' is a file, not a directory"):
        rundir.new_run_dir(tmp_path / "F", "placement", "go")
    for bad in ("a/b", "..", ""):
        with pytest.raises(ValueError, match="may only contain"):
            rundir.check_run_name(bad)
    assert rundir.check_run_name("go-1.5_x") == "go-1.5_x"


# ---------------------------------------------------------------------------- state and metrics


@pytest.mark.parametrize(
    "text, culprit",
    [('{"status": "runn', "Unterminated string"), ("[1, 2]", "JSON list, not an object")],
)
def test_a_corrupt_state_file_is_named(tmp_path, text, culprit):
    (tmp_path / rundir.STATE_FILE).write_text(text)
    with pytest.raises(ValueError) as e:
        rundir.read_state(tmp_path)
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / "state.json") in message and culprit in message
    assert "repair it, or delete it" in message
    with pytest.raises(ValueError, match="state.json is corrupt"):
        rundir.write_state(tmp_path, status="running")
    assert (tmp_path / rundir.STATE_FILE).read_text() == text  # not overwritten


def test_write_state_drops_keys(tmp_path):
    rundir.write_state(tmp_path, status="crashed", error="boom", traceback="...")
    state = rundir.write_state(tmp_path, drop=("error", "traceback", "absent"), status="running")
    assert state == rundir.read_state(tmp_path) == {"status": "running"}


METRICS = """\
timesteps,wall_seconds,kind,reward_mean,speedup_geomean,valid_fraction,step_time_mean,samples_per_second
16,1.0,train,0.1,1.1,1.0,0.01,10
16,1.2,val,,1.2,1.0,0.01,
32,2.0,train,0.2,1.2,1.0,0.01,10
32,2.1,val,,1.3,1.0,0.01,
48,3.0,train,0.3,1.3,1.0,0.01,10
"""


def test_truncate_metrics_drops_the_rows_past_the_checkpoint(tmp_path):
    path = tmp_path / rundir.METRICS
    path.write_text(METRICS)
    assert rundir.truncate_metrics(tmp_path, 32) == 1
    assert path.read_text().replace("\r\n", "\n") == METRICS.rsplit("48,", 1)[0]
    assert rundir.truncate_metrics(tmp_path, 32) == 0  # nothing more to drop
    assert rundir.truncate_metrics(tmp_path, 16) == 2
    rows = path.read_text().splitlines()
    assert rows[0].startswith("timesteps,") and [r.split(",")[0] for r in rows[1:]] == ["16", "16"]
    assert rundir.truncate_metrics(tmp_path / "no-run", 16) == 0  # no metrics: nothing to do


def test_truncate_metrics_drops_a_row_cut_short_and_keeps_unreadable_ones(tmp_path):
    path = tmp_path / rundir.METRICS
    path.write_text(METRICS.replace("32,2.1,val", "oops,2.1,val") + "6")  # killed mid-row ("64,")
    assert rundir.truncate_metrics(tmp_path, 40) == 2  # the row at 48 and the one cut short
    text = path.read_text()
    assert text.endswith("\n") and "oops,2.1,val" in text and "48," not in text
    rundir.MetricsLog(tmp_path).write(timesteps=40, kind="train")  # appends on a row of its own
    assert path.read_text().splitlines()[-1].startswith("40,,train")


def test_last_wall_seconds_skips_damaged_values(tmp_path):
    (tmp_path / rundir.METRICS).write_text(METRICS + "64,x,train\n")
    assert rundir.MetricsLog(tmp_path).last_wall_seconds() == 3.0


# ---------------------------------------------------------------------------- the run lock


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    from run_locks import lock_held_elsewhere

    with lock_held_elsewhere(tmp_path) as holder:
        assert rundir.lock_holder(tmp_path) == holder.pid
        with pytest.raises(rundir.RunLocked) as e, rundir.locked(tmp_path):
            pass
        message = str(e.value)
        assert isinstance(e.value, ValueError) and e.value.pid == holder.pid
        assert "\n" not in message and f"process {holder.pid} is training it" in message
        assert f"kill {holder.pid}" in message and str(tmp_path / rundir.LOCK) in message
    # the holder was killed (-9): its pid stays in the file, but the lock is free
    assert rundir.lock_holder(tmp_path) == holder.pid
    with rundir.locked(tmp_path):
        assert rundir.lock_holder(tmp_path) == os.getpid()
        second = rundir.locked(tmp_path)  # a second holder in this process too
        with pytest.raises(rundir.RunLocked, match=f"process {os.getpid()}"), second:
            pass
    assert rundir.lock_holder(tmp_path) is None  # released: nobody is named


def test_graceful_stops_nest_and_a_stop_requested_outside_carries_in(capsys):
    """A sweep (outer block) around a trial's training loop (inner block): SIGTERM during the
    training stops both; one between trials stops the next trial at its first check."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with rundir.graceful_stop("stopping the sweep") as outer:
        with rundir.graceful_stop() as inner:  # SIGTERM is the outer block's: taken over
            os.kill(os.getpid(), signal.SIGTERM)
            assert inner.requested and outer.requested
            assert "SIGTERM again to stop at once" in capsys.readouterr().err
        assert callable(signal.getsignal(signal.SIGTERM))  # the outer block's again
        with rundir.graceful_stop() as later:  # the next trial's loop stops at its first check
            assert later.requested
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with rundir.graceful_stop() as outer:
        os.kill(os.getpid(), signal.SIGTERM)  # between two trials
        assert "stopping after this step" in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt), rundir.graceful_stop() as inner:
            assert inner.requested
            os.kill(os.getpid(), signal.SIGTERM)  # a second signal stops at once
        assert outer.requested
    with rundir.graceful_stop() as fresh:  # once the blocks are closed nothing carries over
        assert not fresh.requested
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_run_files_of_a_size_graphopt_never_writes_are_refused_unread(tmp_path):
    run = rundir.new_run_dir(tmp_path, "placement", "big")
    (run / rundir.CONFIG_FILE).write_text("task: placement\n")
    (run / rundir.BEST).write_bytes(b"")
    rundir.check_run_dir(run)
    for name in (rundir.STATE_FILE, rundir.MODEL_INFO, rundir.CONFIG_FILE):
        path = run / name
        with path.open("wb") as f:  # sparse: no disk space taken
            f.truncate(rundir.MAX_RUN_FILE_BYTES + 1)
        with pytest.raises(ValueError, match=rf"{name} is 4,194,305 bytes; .* not a file graphopt"):
            rundir.check_run_dir(run)
        if name == rundir.STATE_FILE:
            with pytest.raises(ValueError, match="4,194,305 bytes"):
                rundir.read_state(run)
        path.write_text("{}")


def test_a_run_stopped_while_set_up_is_removed(tmp_path) -> None:
    """#40: a Ctrl-C or SIGTERM between a run directory's creation and its first checkpoint left
    a run that says it is starting, with nothing to resume from."""
    run = rundir.new_run_dir(tmp_path, "placement", "r")
    with pytest.raises(KeyboardInterrupt), rundir.removed_if_interrupted(run):
        (run / "config.yaml").write_text("a: 1\n")
        raise KeyboardInterrupt
    assert not run.exists() and (tmp_path / "placement").is_dir()
    run = rundir.new_run_dir(tmp_path, "placement", "r")
    with pytest.raises(KeyboardInterrupt), rundir.removed_if_interrupted(run, unless=run / "x"):
        (run / "x").write_text("")  # the resume point exists: the run is kept
        raise KeyboardInterrupt
    assert (run / "x").exists()
    with pytest.raises(ValueError), rundir.removed_if_interrupted(run):
        raise ValueError("an error is the caller's to record")
    assert (run / "x").exists()
