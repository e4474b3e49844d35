"""A set of files written into a directory whole or not at all (graphopt.file_set): nothing
before the commit, no staging file left, names that could resolve elsewhere refused, every file
back as it was when one cannot be put in place, Ctrl-C and SIGTERM handled before or after the
renames, never between."""

from __future__ import annotations

import gc
import os
import signal
import threading
from pathlib import Path

import pytest

from graphopt import file_set
from graphopt.file_set import FileSet, check_name
from graphopt.signals import interrupts


@pytest.fixture
def collect_garbage():
    """``gc.collect`` over only the objects made since the test began: what the suite imported
    before it is frozen (``gc.freeze``) until the test ends. A set dropped without a commit is
    discarded as soon as it is collected; a full collection of the worker's heap (torch, numba,
    everything other tests imported) takes 0.3-0.6 s, this one milliseconds. A frozen object can
    only keep a test's object alive, never free it: the test can fail this way, not pass wrongly."""
    gc.freeze()
    try:
        yield gc.collect
    finally:
        gc.unfreeze()


def listing(root: Path) -> dict[str, str]:
    """Every file under ``root`` (hidden ones included) and its text."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "name", ["../x.json", "/etc/x.json", "a/b.json", "..", ".", "", ".h", "a\\b", "a\0b", 5]
)
def test_a_name_that_could_resolve_elsewhere_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="is not a plain file name inside the directory"):
        check_name(name)
    files = FileSet(tmp_path / "out")
    with pytest.raises(ValueError, match="plain file name"):
        files.write(name, "x")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_new_directory_appears_whole_at_the_commit(tmp_path):
    target = tmp_path / "a" / "b" / "out"
    files = FileSet(target)
    files.write("one.json", "1")
    files.write("two.json", "2")
    files.write("one.json", "1 again")  # the later text wins
    files.flush()
    assert not (tmp_path / "a" / "b" / "out").exists()  # staged beside it, not yet in place
    assert files.commit(last=("two.json",)) == target
    assert listing(tmp_path) == {"a/b/out/one.json": "1 again", "a/b/out/two.json": "2"}
    (tmp_path / "plain").mkdir()
    assert target.stat().st_mode == (tmp_path / "plain").stat().st_mode  # the umask's, not 0700


def test_into_an_existing_directory_other_files_are_kept_and_replaced_ones_replaced(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    (tmp_path / "one.json").write_text("old")
    files = FileSet(tmp_path)
    files.write("one.json", "new")
    files.write("index.json", "i")
    assert listing(tmp_path)["one.json"] == "old"  # staged: nothing in place yet
    files.commit(last=("index.json",))
    assert listing(tmp_path) == {"index.json": "i", "keep.txt": "mine", "one.json": "new"}
    files.write("two.json", "2")  # a second set
    files.commit()
    assert listing(tmp_path)["two.json"] == "2"


def test_a_set_given_up_leaves_nothing_not_even_the_parents_made_for_it(tmp_path, collect_garbage):
    files = FileSet(tmp_path / "p" / "q" / "out")
    files.write("x.json", "x")
    files.discard()
    assert list(tmp_path.iterdir()) == []
    existing = tmp_path / "d"
    existing.mkdir()
    files = FileSet(existing)
    files.write("x.json", "x")
    del files
    collect_garbage()  # collected without a commit: discarded
    assert list(existing.iterdir()) == []


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_a_rename_that_fails_puts_every_file_back(tmp_path, monkeypatch, fail_at):
    (tmp_path / "a.json").write_text("old a")
    (tmp_path / "c.json").write_text("old c")
    before = listing(tmp_path)
    files = FileSet(tmp_path)
    for name in ("a.json", "b.json", "c.json"):
        files.write(name, "new")
    calls = []
    rename = os.rename

    def failing(src, dst):
        calls.append(dst)
        if len(calls) == fail_at:
            raise OSError(28, "No space left on device")
        rename(src, dst)

    monkeypatch.setattr(file_set.os, "rename", failing)
    with pytest.raises(ValueError, match="No space left on device; nothing was changed in"):
        files.commit()
    monkeypatch.undo()
    assert listing(tmp_path) == before


def test_a_directory_in_a_files_place_fails_before_any_rename(tmp_path):
    (tmp_path / "x.json").mkdir()
    (tmp_path / "x.json" / "inside").write_text("mine")
    files = FileSet(tmp_path)
    files.write("a.json", "a")
    files.write("x.json", "x")
    with pytest.raises(ValueError, match="cannot write '.*x.json': a directory is in its place"):
        files.commit()
    assert listing(tmp_path) == {"x.json/inside": "mine"}


@pytest.mark.parametrize("fresh", [True, False], ids=["new-directory", "existing-directory"])
@pytest.mark.parametrize("at", range(4))
def test_sigterm_before_the_commit_leaves_nothing_new(tmp_path, collect_garbage, fresh, at):
    target = tmp_path / "out"
    if not fresh:
        target.mkdir()
        (target / "a.json").write_text("old")
    before = listing(tmp_path)
    with pytest.raises(KeyboardInterrupt), interrupts():
        files = FileSet(target)
        for k, name in enumerate(("a.json", "b.json", "index.json")):
            if k == at:
                os.kill(os.getpid(), signal.SIGTERM)
            files.write(name, "new")
        if at == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        files.commit(last=("index.json",))  # pragma: no cover - interrupted before
    del files
    collect_garbage()
    assert listing(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if not fresh else [])


@pytest.mark.parametrize("fresh", [True, False], ids=["new-directory", "existing-directory"])
def test_sigterm_during_the_renames_comes_after_the_whole_set(tmp_path, monkeypatch, fresh):
    target = tmp_path / "out"
    if not fresh:
        target.mkdir()
        (target / "a.json").write_text("old")
    files = FileSet(target)
    for name in ("a.json", "b.json", "index.json"):
        files.write(name, "new")
    rename = os.rename

    def signalled(src, dst):
        os.kill(os.getpid(), signal.SIGTERM)  # held: handled once every file is in place
        rename(src, dst)

    monkeypatch.setattr(file_set.os, "rename", signalled)
    with pytest.raises(KeyboardInterrupt), interrupts():
        files.commit(last=("index.json",))
    monkeypatch.undo()
    assert listing(tmp_path) == {f"out/{n}": "new" for n in ("a.json", "b.json", "index.json")}


def test_a_directory_that_cannot_be_written_is_refused_without_creating_anything(tmp_path):
    (tmp_path / "F").write_text("")
    with pytest.raises(ValueError, match="output directory '.*F' is a file, not a directory"):
        FileSet(tmp_path / "F")
    with pytest.raises(ValueError, match="cannot create the directory: '.*F' is a file"):
        FileSet(tmp_path / "F" / "sub" / "out", "--out")
    assert listing(tmp_path) == {"F": ""}


# ---------------------------------------------------------------------- one file: write_file
def test_write_file_takes_text_bytes_or_a_writer(tmp_path):
    seen = []

    def writer(tmp: Path) -> None:
        seen.append(tmp)
        tmp.write_bytes(b"\x00made")

    assert file_set.write_file(tmp_path / "a.txt", "ünï") == tmp_path / "a.txt"
    file_set.write_file(tmp_path / "b.bin", b"\x01\x02")
    file_set.write_file(tmp_path / "sub" / "c.tar.gz", writer)
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "ünï"
    assert (tmp_path / "b.bin").read_bytes() == b"\x01\x02"
    assert (tmp_path / "sub" / "c.tar.gz").read_bytes() == b"\x00made"
    (tmp,) = seen  # hidden, beside the file, its suffix kept (savefig, np.savez choose by it)
    assert tmp.parent == tmp_path / "sub" and tmp.name.startswith(".c.tar.")
    assert tmp.name.endswith(".tmp.gz")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.txt", "b.bin", "c.tar.gz", "sub"]


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_write_that_fails_leaves_the_old_file_and_nothing_else(tmp_path, error):
    (tmp_path / "old.json").write_text("old")

    def half(tmp: Path) -> None:
        tmp.write_text("half")
        raise error

    raised = ValueError if isinstance(error, OSError) else KeyboardInterrupt
    with pytest.raises(raised) as info:
        file_set.write_file(tmp_path / "old.json", half)
    if raised is ValueError:
        assert (
            str(info.value)
            == f"cannot write {str(tmp_path / 'old.json')!r}: No space left on device"
        )
    with pytest.raises(raised):
        file_set.write_file(tmp_path / "new" / "deeper" / "x.json", half)
    assert listing(tmp_path) == {"old.json": "old"}  # the folders made for it are gone too
    assert [p.name for p in tmp_path.iterdir()] == ["old.json"]


def test_a_path_that_cannot_be_a_file_is_one_line_and_nothing_is_left(tmp_path):
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "blocker").write_text("a file where a folder would go")
    with pytest.raises(ValueError, match=r"^cannot write '.*dir\.json': Is a directory$"):
        file_set.write_file(tmp_path / "dir.json", "x")
    with pytest.raises(ValueError, match=r"^cannot write '.*x\.json': Not a directory$"):
        file_set.write_file(tmp_path / "blocker" / "x.json", "x")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["blocker", "dir.json"]


def test_sigterm_during_a_write_leaves_nothing(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")

    def slow(tmp: Path) -> None:
        tmp.write_text("part")
        os.kill(os.getpid(), signal.SIGTERM)  # inside interrupts(): a KeyboardInterrupt
        tmp.write_text("whole")

    with interrupts(), pytest.raises(KeyboardInterrupt):
        file_set.write_file(tmp_path / "out" / "x.json", slow)
    assert list(tmp_path.iterdir()) == []


def test_a_figure_is_written_in_the_format_of_its_suffix_at_exactly_its_path(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    try:
        file_set.write_figure(tmp_path / "plot", fig, dpi=20)  # no suffix: PNG, none added
        file_set.write_figure(tmp_path / "plot.svg", fig)
        with pytest.raises(ValueError, match="Format 'nope' is not supported"):
            file_set.write_figure(tmp_path / "plot.nope", fig)
    finally:
        plt.close(fig)
    assert (tmp_path / "plot").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in (tmp_path / "plot.svg").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot", "plot.svg"]


def test_a_set_takes_bytes_too(tmp_path):
    files = FileSet(tmp_path / "out")
    files.write("a.png", b"\x89PNG\x00")
    files.write("a.csv", "x\r\n")
    files.commit()
    assert (tmp_path / "out" / "a.png").read_bytes() == b"\x89PNG\x00"
    assert (tmp_path / "out" / "a.csv").read_bytes() == b"x\r\n"


# ------------------------------------------------- files in several directories: write_together
def test_files_in_several_directories_appear_together(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "r.png").write_text("old")
    files = {
        tmp_path / "new" / "r.json": "j",
        tmp_path / "old" / "r.png": b"png",
        tmp_path / "new" / "deeper" / "r.csv": "c",  # inside a directory of the same set
    }
    assert file_set.write_together(files) == list(files)
    assert listing(tmp_path) == {
        "new/r.json": "j",
        "new/deeper/r.csv": "c",
        "old/r.png": "png",
    }


def test_a_file_given_twice_is_refused_before_anything_is_made(tmp_path):
    with pytest.raises(ValueError, match="is given twice"):
        file_set.write_together({tmp_path / "a" / "x.json": "1", tmp_path / "a/../a/x.json": "2"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("at", range(4))
def test_sigterm_before_the_moves_leaves_nothing_in_any_directory(
    tmp_path, monkeypatch, collect_garbage, at
):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "r.png").write_text("old")
    before = listing(tmp_path)
    written = []
    write = FileSet.write

    def signalled(self, name, text):
        if len(written) == at:
            os.kill(os.getpid(), signal.SIGTERM)
        written.append(name)
        write(self, name, text)

    monkeypatch.setattr(FileSet, "write", signalled)
    if at == 3:  # every file written, none moved yet
        monkeypatch.setattr(FileSet, "flush", lambda self: os.kill(os.getpid(), signal.SIGTERM))
    files = {
        tmp_path / "new" / "r.json": "j",
        tmp_path / "new" / "deeper" / "r.csv": "c",
        tmp_path / "old" / "r.png": "png",
    }
    with pytest.raises(KeyboardInterrupt), interrupts():
        file_set.write_together(files)
    collect_garbage()
    assert listing(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]


def test_sigterm_during_the_moves_comes_after_every_directory(tmp_path, monkeypatch):
    rename = os.rename

    def signalled(src, dst):
        os.kill(os.getpid(), signal.SIGTERM)  # held: handled once every file is in place
        rename(src, dst)

    monkeypatch.setattr(file_set.os, "rename", signalled)
    with pytest.raises(KeyboardInterrupt), interrupts():
        file_set.write_together({tmp_path / "a" / "x.json": "x", tmp_path / "b" / "y.png": "y"})
    monkeypatch.undo()
    assert listing(tmp_path) == {"a/x.json": "x", "b/y.png": "y"}


def test_a_later_directory_that_fails_names_the_files_already_in_place(tmp_path, monkeypatch):
    rename = os.rename

    def failing(src, dst):
        if "b" in (Path(dst).name, Path(dst).parent.name):
            raise OSError(28, "No space left on device")
        rename(src, dst)

    monkeypatch.setattr(file_set.os, "rename", failing)
    with pytest.raises(ValueError, match=r"No space left on device.*the files in '.*a' were"):
        file_set.write_together({tmp_path / "a" / "x.json": "x", tmp_path / "b" / "y.png": "y"})
    monkeypatch.undo()
    assert listing(tmp_path) == {"a/x.json": "x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # no staging directory left


def test_a_staged_set_is_moved_into_place_with_the_files_its_last_after_the_others(
    tmp_path, monkeypatch
):
    staged = FileSet(tmp_path / "decisions", last=("index.json",))
    staged.write("index.json", "i")
    staged.write("a.json", "a")
    renamed = []
    rename = os.rename

    def recorded(src, dst):
        renamed.append(str(Path(dst).relative_to(tmp_path)))
        rename(src, dst)

    monkeypatch.setattr(file_set.os, "rename", recorded)
    files = {tmp_path / "decisions" / "r.json": "r", tmp_path / "plots" / "p.png": "p"}
    assert file_set.write_together(files, staged=[staged]) == list(files)
    assert listing(tmp_path) == {
        "decisions/a.json": "a",
        "decisions/index.json": "i",
        "decisions/r.json": "r",
        "plots/p.png": "p",
    }
    # the staged set first (its directory is new: one rename), then the plots' directory
    assert renamed == ["decisions", "plots"] and staged.names == ()
    (tmp_path / "decisions" / "b.json").write_text("old b")
    staged.write("index.json", "i2")
    staged.write("b.json", "b")
    renamed.clear()
    file_set.write_together({tmp_path / "decisions" / "r.json": "r2"}, staged=[staged])
    moved_in = [n for n in renamed if Path(n).parent.name == "decisions"]  # not set aside
    assert moved_in == ["decisions/b.json", "decisions/r.json", "decisions/index.json"]
    assert (tmp_path / "decisions" / "index.json").read_text() == "i2"


def test_a_name_a_staged_set_holds_is_refused_and_the_staged_set_discarded(tmp_path):
    staged = FileSet(tmp_path / "decisions", last=("index.json",))
    staged.write("index.json", "i")
    with pytest.raises(ValueError, match="index.json' is given twice"):
        file_set.write_together({tmp_path / "decisions" / "index.json": "x"}, staged=[staged])
    assert list(tmp_path.iterdir()) == [] and staged.names == ()


@pytest.mark.parametrize("stop", ["sigterm", "error"])
def test_a_stop_before_the_moves_discards_the_staged_set_too(
    tmp_path, monkeypatch, collect_garbage, stop
):
    (tmp_path / "decisions").mkdir()
    (tmp_path / "decisions" / "index.json").write_text("old")
    before = listing(tmp_path)
    staged = FileSet(tmp_path / "decisions", last=("index.json",))
    staged.write("index.json", "new")
    staged.write("a.json", "a")
    flush = FileSet.flush

    def stopped(self):
        if self is not staged:  # the staged set is flushed first: stopped at the next one
            if stop == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            raise ValueError("cannot write 'plots/p.png': No space left on device")
        flush(self)

    monkeypatch.setattr(FileSet, "flush", stopped)
    files = {tmp_path / "plots" / "p.png": "p"}
    with pytest.raises(KeyboardInterrupt if stop == "sigterm" else ValueError), interrupts():
        file_set.write_together(files, staged=[staged])
    monkeypatch.undo()
    collect_garbage()
    assert listing(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decisions"]
