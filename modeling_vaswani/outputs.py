"""How every script claims and writes its outputs (not from the paper): nothing a run reads is written
over (`claim`: compared resolved and by (st_dev, st_ino), so a link or another spelling is the same file),
nothing is left half-written (`write_file`, `write_folder`: a temporary sibling renamed into place).
Standard library only, so scripts load it before torch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

# The shipped model: hub_card/ at the root of the repository this package is installed from.
SHIPPED_MODEL = Path(__file__).resolve().parent.parent / "hub_card"
MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
STDIN, STDOUT = 0, 1


class OutputClashError(ValueError):
    """An output that would write over what the run reads (the user's to fix: a ValueError)."""


def _where(thing) -> tuple[tuple[int, int] | None, Path | None]:
    """(st_dev, st_ino) or None, resolved path or None, of a path or of a standard stream's regular file."""
    try:
        status = os.fstat(thing) if isinstance(thing, int) else os.stat(thing)
    except OSError:
        status = None
    if not isinstance(thing, int):
        return (status.st_dev, status.st_ino) if status else None, Path(thing).resolve()
    if status is None or not stat.S_ISREG(status.st_mode):  # a terminal or a pipe: nothing to write over
        return None, None
    try:  # the file's path, where the system tells it (Linux), to compare folders too
        path = Path(os.readlink(f"/proc/self/fd/{thing}"))
    except OSError:
        path = None
    return (status.st_dev, status.st_ino), (path if path is not None and path.is_absolute() else None)


def _relation(output, source) -> str | None:
    """How `output` overlaps `source` ("is", "lies inside", "contains"), or None."""
    (out_id, out_path), (in_id, in_path) = _where(output), _where(source)
    if (out_id is not None and out_id == in_id) or (out_path is not None and out_path == in_path):
        return "is"
    if out_path is None or in_path is None:
        return None
    if out_path.is_relative_to(in_path):
        return "lies inside"
    return "contains" if in_path.is_relative_to(out_path) else None


def _name(flag: str, path) -> str:
    return flag if isinstance(path, int) else f"{flag} {path}"


def claim(flag: str, path, reads=(), folder: bool = False, results: bool = False, replace_flag: str | None = None,
          replace: bool = True):
    """The output `path` of `flag` (a file, a folder with `folder`, or STDOUT), checked against `reads` ((flag,
    path or None) pairs), standard input and the shipped model (OutputClashError). With `results` a model folder
    is refused too; with `replace_flag` a full output unless `replace` (FileExistsError)."""
    named = _name(flag, path)
    if not isinstance(path, int):
        if folder and Path(path).exists() and not Path(path).is_dir():
            raise NotADirectoryError(f"{named}: is a file; name a folder to write to.")
        if not folder and Path(path).is_dir():
            raise IsADirectoryError(f"{named}: is a folder; name the file to write.")
    for source_flag, source in [*reads, ("standard input", STDIN), ("the shipped model", SHIPPED_MODEL)]:
        # What is not there (a Hub id, say) cannot be written over.
        if source is None or not (isinstance(source, int) or Path(source).exists()):
            continue
        if (relation := _relation(path, source)) is None:
            continue
        kind = "file" if isinstance(source, int) or not Path(source).is_dir() else (
            "model folder" if (Path(source) / "config.json").is_file() else "folder")
        what = (f"the shipped model {source}" if source is SHIPPED_MODEL
                else f"the input {kind} {_name(source_flag, source)}, which the run reads")
        raise OutputClashError(f"{named}: {relation} {what}; writing would destroy it. "
                               f"Name another {'folder' if folder else 'file'}.")
    if isinstance(path, int):
        return path
    path = Path(path)
    held = [name for name in MODEL_FILES if (path / name).is_file()] if folder and results else []
    if held:
        raise OutputClashError(f"{named}: is a model folder (it holds {', '.join(held)}); results go to a folder "
                               "of their own, e.g. evaluations/<name>.")
    if replace_flag and not replace and (path.is_file() or (path.is_dir() and any(path.iterdir()))):
        raise FileExistsError(f"{named}: already holds files; name a new {'folder' if folder else 'file'}, "
                              f"or add {replace_flag} to replace it.")
    return path


def _put_in_place(temporary, path: Path, directory: bool = False) -> None:
    # mkstemp and mkdtemp make owner-only files; the output gets the permissions open() would give it.
    os.umask(mask := os.umask(0))
    os.chmod(temporary, (0o777 if directory else 0o666) & ~mask)
    os.replace(temporary, path)


@contextlib.contextmanager
def write_file(path, mode: str = "w", keep_on_interrupt: bool = False, **open_kwargs):
    """A temporary file beside `path` that replaces it on a clean exit, else is deleted; with `keep_on_interrupt`
    a KeyboardInterrupt (Ctrl-C, SIGTERM) puts the part written in place too (translate.py's whole lines)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with open(descriptor, mode, **open_kwargs) as handle:
            yield handle
    except BaseException as error:
        if keep_on_interrupt and isinstance(error, KeyboardInterrupt):
            _put_in_place(temporary, path)
        else:
            Path(temporary).unlink(missing_ok=True)
        raise
    _put_in_place(temporary, path)


@contextlib.contextmanager
def write_folder(path):
    """A temporary folder beside `path` that takes its place on a clean exit (an earlier one goes only then)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial"))
    try:
        yield temporary
        earlier = None
        if path.exists():  # a folder cannot be renamed over a full one: the earlier one steps aside first
            earlier = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
            os.replace(path, earlier / path.name)
        _put_in_place(temporary, path, directory=True)
        if earlier is not None:
            shutil.rmtree(earlier)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
