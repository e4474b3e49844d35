"""Files written whole or not at all: one file (:func:`write_file`), or a set of files in a
directory (:class:`FileSet`).

:func:`write_file` writes one file (text, bytes, or through a function such as ``torch.save``;
:func:`write_figure` a matplotlib figure) to a hidden temporary file beside it (``.NAME.XXXXXXXX.tmp.SUFFIX``, the suffix
kept for writers that choose the format by it) and renames that over the path (``os.replace``,
atomic on POSIX): a reader sees the old file or the new one, never half of one. The parent
folders it makes are removed again, with the temporary file, when the write fails or is
interrupted, so a failed or interrupted write leaves nothing behind.

:class:`FileSet` writes each file into a hidden staging directory and moves the set into place
with :meth:`FileSet.commit`:

- a directory that does not exist yet is staged beside it (``PARENT/.NAME.XXXX.tmp``) and the
  staging directory is renamed to it: one ``rename``, atomic on POSIX;
- into a directory that exists, the set is staged inside it (``DIR/.XXXX.tmp``, so that every
  rename stays on one file system) and each file is renamed into place, the ones named ``last``
  (an index) after the others; a file it replaces is kept aside until all are in place, so a
  rename that fails puts every file back as it was.

Nothing is created before the first file is written: a command that checks its input and fails
leaves nothing behind. The renames run with Ctrl-C and SIGTERM held back
(:func:`graphopt.signals.held`); an error or an interrupt before them (``KeyboardInterrupt``: a
SIGTERM raises it inside :func:`graphopt.signals.interrupts`) removes the staging
directory, and any parent folders made for it, so the directory holds the complete set or nothing
new. A set that is given up without :meth:`~FileSet.commit` or :meth:`~FileSet.discard` is
discarded when the object is collected, at the latest when the interpreter exits.

:func:`write_together` writes files that lie in different directories as one set: a
:class:`FileSet` per directory, all staged before any is moved into place, the moves of all
inside one :func:`graphopt.signals.held` block (``--json FILE --plot FILE``: the two appear
together or neither). Sets a caller has staged already (the decisions of ``--save-decisions``,
:meth:`graphopt.decisions.files.DecisionDir.write_index`) are moved into place with them, first.

Every file name is a plain name inside the directory (:func:`check_name`): a name that could
resolve elsewhere (``../x``, ``/etc/x``, ``a/b``) is refused, never followed.

Performance: creating a file costs 0.2 to 0.5 ms of system time here, as much as preparing a
decision's text; one thread writes the files (the GIL is released in the system calls) while the
caller prepares the next one.

Standard library only, besides :mod:`graphopt.signals`.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from graphopt.signals import held

REPLACED = ".replaced"
"""The folder of a staging directory where the files a commit replaces wait until it is done."""


def check_name(name: object) -> str:
    """Refuse a file name that is not a plain name inside a directory; returns it.

    Raises:
        ValueError: ``name`` is not a string, is empty, ``.`` or ``..``, starts with ``.``
            (staging names), or holds a ``/``, a ``\\`` or a NUL.
    """
    if (
        not isinstance(name, str)
        or not name
        or name.startswith(".")
        or any(c in name for c in "/\\\0")
    ):
        raise ValueError(
            f"{name!r} is not a plain file name inside the directory (no '/', '\\', NUL or "
            "leading '.')"
        )
    return name


def write_file(path: str | Path, content: str | bytes | Callable[[Path], object]) -> Path:
    """Write one file whole or not at all (module docstring); returns its path.

    Args:
        path: the file; its missing parent folders are made (and removed again on failure).
        content: the text (UTF-8), the bytes, or a function that writes the file at exactly
            the path it is given (``fig.savefig``, ``lambda tmp: torch.save(data, tmp)``).

    Raises:
        ValueError: the file cannot be written (one line naming it and why; an ``OSError`` of
            ``content``'s function too); ``path`` is as it was and nothing is left.
        Anything else ``content``'s function raises, and ``KeyboardInterrupt``, after the same
        clean-up.
    """
    path = Path(path)
    made: list[Path] = []
    tmp: Path | None = None
    try:
        try:
            for folder in reversed([p for p in path.absolute().parents if not p.exists()]):
                folder.mkdir()
                made.append(folder)
            tmp = _temporary(path)
            if callable(content):
                content(tmp)
            elif isinstance(content, bytes):
                with open(tmp, "xb") as f:
                    f.write(content)
            else:
                with open(tmp, "x", encoding="utf-8") as f:
                    f.write(content)
            with held():
                os.replace(tmp, path)
                tmp = None
        except OSError as e:
            raise ValueError(f"cannot write {str(path)!r}: {e.strerror or e}") from e
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                break  # something else is in it now: kept
        raise
    return path


def write_figure(path: str | Path, figure: Any, **options: Any) -> Path:
    """:func:`write_file` of a matplotlib ``figure`` in the format of the suffix (``png``
    without one), rendered by :func:`figure_bytes` with ``options`` (``dpi``).

    Raises:
        ValueError: the file cannot be written, or matplotlib has no format of that suffix.
    """
    path = Path(path)
    return write_file(path, figure_bytes(figure, path.suffix[1:].lower() or "png", **options))


def figure_bytes(figure: Any, kind: str = "png", **options: Any) -> bytes:
    """A matplotlib ``figure`` as the bytes of a ``kind`` file (``figure.savefig`` in memory:
    no file, no suffix added); for a :class:`FileSet` or :func:`write_file`."""
    with io.BytesIO() as buffer:
        figure.savefig(buffer, format=kind, **options)
        return buffer.getvalue()


def _temporary(path: Path) -> Path:
    """A hidden name beside ``path`` that keeps its suffix: ``a/fig.png`` ->
    ``a/.fig.XXXXXXXX.tmp.png``."""
    suffix = path.suffix
    stem = path.name[: len(path.name) - len(suffix)]
    return path.with_name(f".{stem}.{uuid.uuid4().hex[:8]}.tmp{suffix}")


def _probe(folder: Path) -> OSError | None:
    """Create and remove a file in ``folder``; the error that stopped it, if any (``os.access``
    answers yes to root on a read-only mount)."""
    probe = folder / f".probe.{uuid.uuid4().hex[:8]}.tmp"
    with held():
        try:
            with open(probe, "x"):
                pass
            probe.unlink()
        except OSError as e:
            return e
    return None


def check_directory(path: Path, shown: str) -> None:
    """Refuse a directory that cannot be written, or cannot be created, without creating it.

    Raises:
        ValueError: one line starting with ``shown``: ``path`` is a file, is not writable, or
            its nearest existing folder is a file or is not writable.
    """
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{shown} is a file, not a directory; give a directory")
        error = _probe(path)
        if error is not None:
            raise ValueError(
                f"{shown}: the directory is not writable ({error.strerror or error}); give "
                "another directory"
            )
        return
    for parent in path.absolute().parents:
        if not parent.exists():
            continue
        if not parent.is_dir():
            raise ValueError(
                f"{shown}: cannot create the directory: {str(parent)!r} is a file, not a "
                "directory; give a path that does not go through it"
            )
        error = _probe(parent)
        if error is not None:
            raise ValueError(
                f"{shown}: cannot create the directory: {str(parent)!r} is not writable "
                f"({error.strerror or error}); give another directory"
            )
        return


def _new_folder(parent: Path, prefix: str) -> Path:
    """A new folder ``parent/PREFIX<random>.tmp``, with the mode a ``mkdir`` gives (the umask's;
    ``tempfile.mkdtemp`` would give 0700, which a new output directory would keep)."""
    while True:
        folder = parent / f"{prefix}{uuid.uuid4().hex[:8]}.tmp"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:  # pragma: no cover - 32 random bits taken
            continue


class _Stage:
    """One staging directory, the parent folders made for it and its writer thread; holds no
    reference to its :class:`FileSet`, so it can be discarded when that is collected."""

    def __init__(self, target: Path, shown: str) -> None:
        self.target = target
        self.fresh = not target.exists()
        self.made: list[Path] = []  # parent folders created for the set, outermost first
        self.writer: ThreadPoolExecutor | None = None
        self.pending: list[Future[None]] = []
        self.names: dict[str, None] = {}  # the files staged, in order
        try:
            if self.fresh:
                missing = [p for p in target.absolute().parents if not p.exists()]
                for folder in reversed(missing):
                    folder.mkdir()
                    self.made.append(folder)
                self.dir = _new_folder(target.parent, f".{target.name}.")
            else:
                self.dir = _new_folder(target, ".")
        except OSError as e:
            self.discard()
            raise ValueError(f"{shown}: cannot create the directory: {e.strerror or e}") from None

    def submit(self, name: str, text: str | bytes) -> None:
        if self.writer is None:
            self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="file-set")
        pending = []
        for f in self.pending:
            if f.done():
                f.result()  # raises its failure
            else:
                pending.append(f)
        pending.append(self.writer.submit(self._write, name, text))
        self.pending = pending
        self.names[name] = None

    def _write(self, name: str, text: str | bytes) -> None:
        try:
            if isinstance(text, bytes):
                with open(self.dir / name, "wb") as f:
                    f.write(text)
            else:
                with open(self.dir / name, "w", encoding="utf-8") as f:
                    f.write(text)
        except OSError as e:
            raise ValueError(
                f"cannot write {str(self.target / name)!r}: {e.strerror or e}"
            ) from None

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        errors = [f.exception() for f in pending]
        if self.writer is not None:
            self.writer.shutdown()
            self.writer = None
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            raise failed

    def move_into_place(self, last: tuple[str, ...]) -> None:
        """Rename the staged files into the target (:class:`FileSet`); signals held."""
        if self.fresh and not self.target.exists():
            try:
                os.rename(self.dir, self.target)
                self.made = []
                return
            except OSError:  # made meanwhile: merged into it below
                pass
        names = [n for n in self.names if n not in last] + [n for n in last if n in self.names]
        for name in names:
            dest = self.target / name
            if dest.is_dir() and not dest.is_symlink():
                raise ValueError(
                    f"cannot write {str(dest)!r}: a directory is in its place; remove it or "
                    "choose another directory"
                )
        aside = self.dir / REPLACED
        done: list[tuple[str, bool, bool]] = []  # (name, old file set aside, new file moved)
        try:
            for name in names:
                dest = self.target / name
                replaces = os.path.lexists(dest)
                if replaces:
                    aside.mkdir(exist_ok=True)
                    os.rename(dest, aside / name)
                done.append((name, replaces, False))
                os.rename(self.dir / name, dest)
                done[-1] = (name, replaces, True)
        except OSError as e:
            for name, replaced, moved in reversed(done):  # every file back as it was
                dest = self.target / name
                if moved:
                    os.rename(dest, self.dir / name)
                if replaced:
                    os.rename(aside / name, dest)
            raise ValueError(
                f"cannot write {str(self.target / name)!r}: {e.strerror or e}; nothing was "
                f"changed in {str(self.target)!r}"
            ) from None

    def discard(self) -> None:
        """Stop the writer, remove the staging directory and the folders made for it."""
        if self.writer is not None:
            self.writer.shutdown(wait=True, cancel_futures=True)
            self.writer = None
        self.pending = []
        if getattr(self, "dir", None) is not None and self.dir.exists() and self.dir != self.target:
            shutil.rmtree(self.dir, ignore_errors=True)
        for folder in reversed(self.made):
            try:
                folder.rmdir()
            except OSError:
                break  # something else is in it now: kept
        self.made = []


class FileSet:
    """Files written into ``target`` whole or not at all (module docstring).

    Args:
        target: the directory; created (with its parents) by the first :meth:`commit` of a set
            when missing.
        what: how error messages name it (a command line gives its flag).
        last: the files moved into place after the others when staged (an index), by
            :meth:`commit` unless it is given its own, and by :func:`write_together`.

    Raises:
        ValueError: ``target`` is a file, is not writable, or cannot be created
            (:func:`check_directory`); nothing is created.
    """

    def __init__(
        self, target: str | Path, what: str = "output directory", *, last: tuple[str, ...] = ()
    ) -> None:
        self.path = Path(target)
        self.shown = f"{what} {str(self.path)!r}"
        self.last = last
        check_directory(self.path, self.shown)
        self._stage: _Stage | None = None
        self._finalizer: weakref.finalize | None = None

    def write(self, name: str, text: str | bytes) -> None:
        """Stage file ``name`` (a plain name, :func:`check_name`) with ``text`` (UTF-8; bytes as
        they are); a later write of
        the same name replaces it. The file is written by a thread of its own: a failure to write
        it is raised by a later :meth:`write`, or at the latest by :meth:`flush` or
        :meth:`commit` (after which the set is discarded).

        Raises:
            ValueError: a bad name; the staging directory cannot be created; an earlier file
                could not be written.
        """
        check_name(name)
        try:
            if self._stage is None:
                self._stage = _Stage(self.path, self.shown)
                self._finalizer = weakref.finalize(self, self._stage.discard)
            self._stage.submit(name, text)
        except BaseException:
            self.discard()
            raise

    @property
    def names(self) -> tuple[str, ...]:
        """The files staged since the last :meth:`commit`, in the order first written."""
        return () if self._stage is None else tuple(self._stage.names)

    def flush(self) -> None:
        """Wait until every staged file is written (in the staging directory, not yet in place).

        Raises:
            ValueError: a file could not be written (the first such); the set is discarded.
        """
        if self._stage is None:
            return
        try:
            self._stage.flush()
        except BaseException:
            self.discard()
            raise

    def commit(self, last: tuple[str, ...] | None = None) -> Path:
        """Wait for every staged file, then move the set into place (module docstring), the files
        named in ``last`` (default: the set's own, ``FileSet(last=...)``) after the others;
        returns the directory. Without a staged file nothing is done. The set can be followed by
        another.

        Raises:
            ValueError: a file could not be written or moved into place; the directory is left
                as it was.
        """
        stage = self._stage
        if stage is None:
            return self.path
        try:
            stage.flush()
            with held():
                stage.move_into_place(self.last if last is None else last)
                stage.discard()
                self._forget()
        except BaseException:
            self.discard()
            raise
        return self.path

    def discard(self) -> None:
        """Give up the staged set: nothing of it is left."""
        stage = self._stage
        if stage is not None:
            with held():
                stage.discard()
                self._forget()

    def _forget(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        self._stage = self._finalizer = None


def write_together(
    files: Mapping[Path, str | bytes],
    what: str = "output directory",
    *,
    staged: Sequence[FileSet] = (),
) -> list[Path]:
    """Write ``files``, which may lie in different directories, as one set: every one of them or
    nothing new (module docstring); returns their paths, in the order given.

    The files of one directory are one :class:`FileSet`; ``staged`` are sets the caller has
    written already (each in a directory of its own, its ``last`` files moved in after its
    others), and a file of ``files`` in one of their directories joins that set. Every set is
    staged and written before any is moved into place; the moves of all sets run inside one
    :func:`graphopt.signals.held` block, the ``staged`` sets first, then directory after
    directory in the order the directories first appear, so Ctrl-C or SIGTERM comes before the
    first rename or after the last. An error or an interrupt before the moves removes every
    staging directory, ``staged``'s included, and the folders made for them.

    Args:
        files: each path (missing parent folders are made) with its text (UTF-8) or bytes.
        what: how error messages name a directory.
        staged: sets written already, moved into place with ``files`` (none discarded or
            committed yet).

    Raises:
        ValueError: a path given twice (or a name a ``staged`` set holds already); a directory
            that cannot be written or created (nothing is created); a file that cannot be
            written or moved into place. Files in one directory are put back as they were when
            one of them cannot be moved into place; when that happens in a later directory, the
            files of the earlier ones are in place already, and the message names them.
    """
    paths = [Path(p) for p in files]
    sets: dict[Path, FileSet] = {}  # one per directory: the staged ones, then in order of paths
    try:
        for fs in staged:
            assert fs.path.resolve() not in sets, f"two staged sets write {fs.path}"
            sets[fs.path.resolve()] = fs
        taken = {key: set(fs.names) for key, fs in sets.items()}
        for path in paths:
            key = path.parent.resolve()
            if path.name in taken.setdefault(key, set()):
                raise ValueError(f"{str(path)!r} is given twice; give each output its own file")
            taken[key].add(path.name)
            if key not in sets:
                sets[key] = FileSet(path.parent, what)  # checked before anything is written
        for path, content in zip(paths, files.values(), strict=True):
            sets[path.parent.resolve()].write(path.name, content)
        for fs in sets.values():
            fs.flush()
    except BaseException:
        for fs in reversed(sets.values()):  # a later staging directory may lie in a folder
            fs.discard()  # an earlier one made
        raise
    moved: list[Path] = []
    with held():
        for fs in sets.values():
            try:
                moved.append(fs.commit())
            except ValueError as e:
                for other in reversed(sets.values()):
                    other.discard()
                if moved:
                    shown = ", ".join(repr(str(p)) for p in moved)
                    raise ValueError(f"{e}; the files in {shown} were written") from None
                raise
    return paths
