"""What graphopt's on-disk caches share: where they live, atomic writes, safe reads, one warning.

Caches live under ``$GRAPHOPT_CACHE_DIR`` when it is set, else ``~/.cache/graphopt``, each in its
own folder (``graphs``, ``references``). A cache is an optimisation, never a requirement:

- files are written atomically (a temporary file in the same folder, then ``os.replace``), so a
  crash or a full disk never leaves a half-written entry under a cache file's name;
- files are ``.npz`` archives read with ``allow_pickle=False``: nothing read from disk runs code;
  every member is read in full, so the archive's CRC checks catch a damaged file, and a file that
  cannot be read raises ``ValueError`` for the caller to rebuild the entry;
- a folder that cannot be written is reported once per folder and process, as one log line
  (logger ``graphopt.cache``), and the caller goes on with what it computed in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import numpy as np

CACHE_ENV = "GRAPHOPT_CACHE_DIR"
logger = logging.getLogger("graphopt.cache")
_warned: set[str] = set()


def cache_root(folder: str, cache_dir: str | Path | None = None) -> Path:
    """``cache_dir`` when given, else ``$GRAPHOPT_CACHE_DIR/<folder>``, else
    ``~/.cache/graphopt/<folder>``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "graphopt"
    return base / folder


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` atomically (compressed ``.npz``); creates the folder.

    Raises:
        OSError: the folder cannot be created or written (nothing is left behind).
    """
    assert all(a.dtype != object for a in arrays.values()), "object arrays need pickle"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            # numpy >= 2.1 would take a key 'allow_pickle' as its option; none is used here
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, read in full without pickle.

    Raises:
        ValueError: the file is missing, unreadable, not an ``.npz`` archive, damaged (a CRC
            error) or holds an object array.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: unreadable cache file ({type(e).__name__}: {e})") from None


def source_digest(paths: Iterable[str], skip: Iterable[str] = ()) -> str:
    """A digest of the ``.py`` source under ``paths`` (files or folders, relative to the
    ``graphopt`` package), file names in ``skip`` left out: a cache key that holds it goes stale
    when the code that computes its entries is edited. Computed once per process.

    Without installed source (a zipped package), each file counts by its name alone: the cache's
    version constant then stands alone."""
    return _source_digest(tuple(paths), tuple(sorted(skip)))


@cache
def _source_digest(paths: tuple[str, ...], skip: tuple[str, ...]) -> str:
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for item in paths:
        path = root / item
        files = [path] if path.suffix == ".py" else sorted(path.glob("*.py"))
        for file in files:
            if file.name in skip:
                continue
            h.update(f"{item}/{file.name}".encode() + b"\0")
            with contextlib.suppress(OSError):  # no source installed: the name alone
                h.update(file.read_bytes())
    return h.hexdigest()[:16]


def text_array(text: str) -> np.ndarray:
    """``text`` as a ``uint8`` array of its UTF-8 bytes (no pickle needed to store it)."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def array_text(array: np.ndarray) -> str:
    """Inverse of :func:`text_array`.

    Raises:
        ValueError: not UTF-8 bytes.
    """
    if array.dtype != np.uint8 or array.ndim != 1:
        raise ValueError(f"expected a 1-D uint8 array of text, got {array.dtype} {array.shape}")
    return array.tobytes().decode("utf-8")


def warn_unwritable(folder: Path, error: OSError, fallback: str) -> None:
    """Log once per folder and process that ``folder`` cannot be written, and what happens
    instead (``fallback``)."""
    key = str(folder)
    if key in _warned:
        return
    _warned.add(key)
    reason = error.strerror or str(error)
    logger.warning(
        "graphopt: cache folder %s is not writable (%s); %s. Set %s to a writable folder to "
        "keep them.",
        folder,
        reason,
        fallback,
        CACHE_ENV,
    )
