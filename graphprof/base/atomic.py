"""Writing one output file safely: whole or not at all, never a truncated old file, never a stray temporary.

Every file graphprof writes goes through :func:`write_atomic` (the results through
:func:`graphprof.render.sink.write_result`). The rules, each a cause fixed once:

* a regular file is written to a temporary file beside it and renamed over it, so a write that fails
  half-way (disk full, ``RLIMIT_FSIZE``, Ctrl-C, SIGTERM) leaves the old file byte-identical;
* a name of an open descriptor of this process (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``), or a
  symbolic link that leads to one, is written through in append mode: ``--output /dev/stdout >> log``
  appends to the log, never replaces it;
* a temporary file's name carries the writer's process id (``.out.json.gp1234-0a1b2c3d4e5f.tmp``), and
  while it exists a note in graphprof's cache (``$XDG_CACHE_HOME/graphprof/pending/``) names it; one left
  by a process that no longer runs (SIGKILL between the write and the rename) is removed by the next
  graphprof run of any command (:func:`sweep_pending`), or by the next write into that folder;
* links are not followed to write: a symbolic link where the file should be is refused (one line,
  :class:`~graphprof.errors.OutputError`), never its target replaced, whoever made it; only a link to a
  descriptor of this process (``/dev/stdout``) is written through;
* a read, change and write of one file by several processes at once (``local.json`` learning from two
  runs) holds :func:`locked` around the re-read and the write, so no writer drops another's change;
* :func:`check_path` says, before any work, whether a path can be written (its folder exists and is
  writable, it is not a folder) and :func:`absolute_output` fixes it against the starting folder, so a
  model factory that calls ``os.chdir`` cannot move it.

Plain ``os`` calls: the standard library has no atomic replace that keeps a file's mode and follows links.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from graphprof.errors import GraphprofError, OutputError

__all__ = [
    "STDOUT", "absolute_output", "cache_folder", "check_folder", "check_path", "is_descriptor_path", "locked", "means_stdout", "sigterm_raises",
    "install_staged", "staged_files", "sweep_pending", "write_atomic",
]  # fmt: skip

STDOUT = "-"
"""The output path that means standard output: the caller writes the rendered text there."""

# A temporary file's name: "." + the target's name (cut) + ".gp" + pid + "-" + 12 hex digits + ".tmp".
_NAME_MAX = 255
_TMP_EXTRA = len("..gp-") + 10 + 12 + len(".tmp")
_TMP_PATTERN = re.compile(r"^\..*\.gp(\d+)-[0-9a-f]{12}\.tmp$")
#: When this module was loaded: a stale temporary is older than this process's first write.
_STARTED = time.time()
#: A note that a temporary exists (:func:`_note_pending`): the writer's pid, "-", 12 hex digits.
_NOTE_PATTERN = re.compile(r"^(\d+)-[0-9a-f]{12}$")
#: Whether this process has swept the notes of killed writers (:func:`sweep_pending`).
_swept = False
_DESCRIPTOR_DIRS = ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/")


def cache_folder() -> Path:
    """graphprof's own cache: ``$XDG_CACHE_HOME/graphprof``, or ``~/.cache/graphprof``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "graphprof"


def _temporary_name(name: str) -> str:
    kept = name.encode("utf-8")[: _NAME_MAX - _TMP_EXTRA].decode("utf-8", errors="ignore")
    return f".{kept}.gp{os.getpid()}-{secrets.token_hex(6)}.tmp"


def means_stdout(path: str | os.PathLike[str]) -> bool:
    """``-`` or a name of this process's standard output (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``):
    the file goes to standard output alone, the report to standard error."""
    return str(path) == STDOUT or os.path.normpath(str(path)) in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def _names_descriptor(text: str) -> bool:
    text = os.path.normpath(text)
    return text in ("/dev/stdout", "/dev/stderr", "/dev/stdin") or text.startswith(_DESCRIPTOR_DIRS)


def is_descriptor_path(path: str | os.PathLike[str]) -> bool:
    """A name for an open descriptor of this process (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``),
    itself or through symbolic links (``graph.json -> /proc/self/fd/1``): written through, never replaced."""
    current = os.path.abspath(str(path))
    for _ in range(40):  # the kernel's own limit on links followed
        if _names_descriptor(current) or _names_descriptor(os.path.realpath(os.path.dirname(current)) + "/x"):
            return True
        try:
            link = os.readlink(current)
        except OSError:  # not a link (or missing): the chain ends here
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return False


def absolute_output(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute against the current folder (``-`` as it is); symbolic links are kept, not followed."""
    if str(path) == STDOUT:
        return Path(path)
    return Path(os.path.abspath(path))


def _where_to_write(target: Path) -> tuple[Path, os.stat_result | None]:
    """The file a write to ``target`` lands on (a symlink's target, followed) and its stat, if it exists."""
    try:
        real = Path(os.path.realpath(target, strict=False))
    except OSError as exc:  # a symlink loop
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
    try:
        return real, real.stat()
    except FileNotFoundError:
        return real, None
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc


def _refuse_link(target: Path) -> None:
    """A symbolic link where the file should be is refused: its target is never replaced (nor its folder written)."""
    if not target.is_symlink():
        return
    try:
        to = f" (to {os.readlink(target)!r})"
    except OSError:
        to = ""
    raise OutputError(
        f"cannot write {str(target)!r}: it is a symbolic link{to}, and graphprof does not follow links to replace a file: "
        "name the file itself"
    )


def check_path(path: str | os.PathLike[str], *, regular: bool = False) -> None:
    """Before any work: ``path`` can be written. A missing or unwritable folder, a folder given as the
    file, a symbolic link, or an existing file that cannot be written is an :class:`OutputError`; with
    ``regular`` (a writer that makes files beside it, as ONNX's weights), so is anything but a regular file."""
    if regular and (str(path) == STDOUT or is_descriptor_path(path)):
        raise OutputError(f"cannot write {str(path)!r}: this output is a file with others beside it; name a regular file")
    if str(path) == STDOUT or is_descriptor_path(path):
        return
    if isinstance(path, str) and len(path) > 1 and path.endswith(("/", os.sep)):  # Path() would drop the slash
        raise OutputError(f"cannot write {path!r}: it ends in a slash, so it names a folder; give the file's name")
    target = Path(path)
    _refuse_link(target)
    real, info = _where_to_write(target)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(f"cannot write {str(target)!r}: it is a folder")
    if regular and info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputError(f"cannot write {str(target)!r}: it is not a regular file, and this output writes files beside it")
    if info is not None and not stat.S_ISREG(info.st_mode):
        if not os.access(real, os.W_OK):
            raise OutputError(f"cannot write {str(target)!r}: permission denied")
        return
    directory = real.parent
    if not directory.is_dir():
        raise OutputError(f"cannot write {str(target)!r}: folder {str(directory)!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {str(target)!r}: folder {str(directory)!r} is not writable")
    _sweep_once()  # killed writers' temporaries, wherever they wrote
    _sweep_stale(directory)  # a killed writer's temporary goes now, before the work, not at the write
    if info is not None and not os.access(real, os.W_OK):
        raise OutputError(f"cannot write {str(target)!r}: the file is not writable")


def check_folder(path: str | os.PathLike[str]) -> None:
    """Before any work: ``path`` is a folder graphprof can write files into, or one it can make (its nearest
    existing parent is a writable folder). A file, a link to one, or a read-only folder is an :class:`OutputError`."""
    folder = Path(os.path.abspath(path))
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"cannot write into {str(path)!r}: it is a file, not a folder")
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"cannot make the folder {str(path)!r}: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write into {str(path)!r}: folder {str(existing)!r} is not writable")


@contextmanager
def sigterm_raises(message: str, error: type[GraphprofError] = OutputError) -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises, so ``finally`` and ``except BaseException``
    clauses clean up (a temporary file, child processes); the signal is then delivered again to the handler
    that was there before (by default: the process ends), or, if that handler returns, ``error(message)``."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    if received:
        signal.raise_signal(signal.SIGTERM)
        raise error(message)  # the old handler returned


class _Terminated(BaseException):
    """SIGTERM arrived while a block ran (raised by :func:`sigterm_raises`'s handler)."""


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


def _remove_temporary(path: Path) -> None:
    """Remove ``path`` when it is a temporary of our naming (a file, or a folder of :func:`staged_files`) of
    this user's, whose writer no longer runs and which is older than this process; else leave it."""
    found = _TMP_PATTERN.match(path.name)
    if found is None or int(found.group(1)) == os.getpid() or _running(int(found.group(1))):
        return
    with suppress(OSError):
        info = path.lstat()
        if info.st_uid != os.getuid() or info.st_mtime >= _STARTED:
            return
        if stat.S_ISREG(info.st_mode):
            os.unlink(path)
        elif stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)


def _sweep_stale(directory: Path) -> None:
    """Remove the temporaries of our naming that a killed writer left in ``directory``. Best effort: a file
    that cannot be removed stays."""
    with suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            _remove_temporary(Path(entry.path))


def _pending_folder() -> Path:
    return cache_folder() / "pending"


def _note_pending(tmp: Path) -> Path | None:
    """A note in graphprof's cache that names ``tmp`` while it exists, so that the next run finds it if this
    process is killed first; ``None`` where the cache cannot be written (best effort)."""
    note = _pending_folder() / f"{os.getpid()}-{secrets.token_hex(6)}"
    try:
        note.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(os.fspath(tmp))
    except OSError:
        return None
    return note


def sweep_pending() -> None:
    """Remove every temporary a killed graphprof writer left, wherever it wrote: the notes in graphprof's
    cache (``pending/PID-TOKEN``) name them. Only a file or folder of this module's naming, this user's,
    whose writer no longer runs, goes (:func:`_remove_temporary`); then its note. Best effort. Every command
    line run calls it first; the library, at its first write."""
    global _swept
    _swept = True
    with suppress(OSError), os.scandir(_pending_folder()) as entries:
        for entry in entries:
            found = _NOTE_PATTERN.match(entry.name)
            if found is None or int(found.group(1)) == os.getpid() or _running(int(found.group(1))):
                continue
            with suppress(OSError), open(entry.path, encoding="utf-8", errors="surrogateescape") as handle:
                _remove_temporary(Path(handle.read(8192)))
            with suppress(OSError):
                os.unlink(entry.path)


def _sweep_once() -> None:
    if not _swept:
        sweep_pending()


def _append_through(target: Path, raw: bytes) -> None:
    """Write to a descriptor's name in append mode: after what is there (the shell's ``>>`` and ``>`` alike)."""
    try:
        with open(target, "ab") as handle:
            handle.write(raw)
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc


def _write_through(target: Path, real: Path, info: os.stat_result, raw: bytes) -> None:
    """A character device or FIFO (``/dev/null``, a pipe): written through, never replaced."""
    if not (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        raise OutputError(f"cannot write {str(target)!r}: it is neither a regular file, a device nor a FIFO")
    try:
        with open(real, "wb") as handle:  # opening a FIFO waits for its reader, as a shell's > does
            handle.write(raw)
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc


def _replace(target: Path, real: Path, info: os.stat_result | None, raw: bytes) -> None:
    """Write a temporary file beside ``real`` and rename it over ``real``; the temporary never outlives a failure."""
    tmp = real.parent / _temporary_name(real.name)
    # os.open with 0o666 lets the umask decide a new file's mode (mkstemp would force 0o600); an
    # existing file's mode is copied over before the rename.
    with sigterm_raises("writing was interrupted by SIGTERM; nothing was written"), _pending(tmp):
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
            if info is not None:
                os.chmod(tmp, stat.S_IMODE(info.st_mode))
            os.replace(tmp, real)
        except BaseException as exc:  # an interrupt too: never leave the temporary file behind
            tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
            raise


@contextmanager
def _pending(tmp: Path) -> Iterator[None]:
    """While the block runs, a note in the cache names ``tmp`` (:func:`sweep_pending` finds it if we are killed)."""
    note = _note_pending(tmp)
    try:
        yield
    finally:
        if note is not None:
            with suppress(OSError):
                os.unlink(note)


@contextmanager
def staged_files(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary folder beside ``target`` (this module's naming, noted as pending) for a writer that makes
    several files at once (an ONNX file and its ``.data`` weights): the block writes them there, and
    :func:`install_staged` renames each over its name beside ``target``. The folder goes whatever happens."""
    target = Path(target)
    folder = target.parent / _temporary_name(target.name)
    _sweep_once()
    with sigterm_raises("writing was interrupted by SIGTERM; nothing was written"), _pending(folder):
        try:
            folder.mkdir(mode=0o700)
        except OSError as exc:
            raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def install_staged(staged: Path, target: Path) -> None:
    """Rename ``staged`` (a file in a :func:`staged_files` folder) over ``target``: a regular file or none,
    never a symbolic link (:func:`check_path` with ``regular``)."""
    check_path(target, regular=True)
    try:
        os.replace(staged, target)
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc


def write_atomic(target: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``target`` so that no half-written or temporary file remains (see the module docstring).

    A regular file (new or existing) is replaced by rename, keeping an existing file's permission bits; a
    symbolic link is refused (its target is never replaced); a descriptor's name (or a link to one), a
    character device or a FIFO is written through.
    """
    target = Path(target)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if is_descriptor_path(target):
        _append_through(target, raw)
        return
    _refuse_link(target)
    _sweep_once()
    real, info = _where_to_write(target)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(f"cannot write {str(target)!r}: it is a folder")
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_through(target, real, info, raw)
        return
    if not real.parent.is_dir():
        raise OutputError(f"cannot write {str(target)!r}: folder {str(real.parent)!r} does not exist")
    _sweep_stale(real.parent)
    _replace(target, real, info, raw)


@contextmanager
def locked(target: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock for ``target`` (``fcntl.flock`` on ``.NAME.lock`` beside it, made when missing)
    while the block runs: the block re-reads, changes and writes ``target`` with no other holder between.
    The lock file stays (removing it would let two writers lock two different files); where there is no
    ``fcntl`` (Windows) the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    target = Path(target)
    lock_path = target.parent / f".{target.name}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise OutputError(f"cannot lock {str(target)!r}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits for the holder; released when the descriptor closes, or the process dies
        yield
    finally:
        os.close(fd)
