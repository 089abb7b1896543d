"""Assertions and folder edits shared by the tests (plain functions: `from checks import ...`).

    assert_names(error, *names)        the message of `error` (a pytest ExceptionInfo, an exception or
                                       a string) names each of `names`: the offending field, value, path
    run_script(monkeypatch, capsys, script, *args)
                                       `python scripts/<script> args`, in this process: (exit code, stderr)
    assert_error_line(code, err, *names, alone=False)
                                       exit status 2, no traceback, and as the last line of stderr the one
                                       `error: ...` line, naming `names` (alone: the only line)
    copy_folder(folder, tmp_path)      a copy of a shared folder, to damage
    edit_json(path, **changes)         change (or, with DELETE, remove) fields of a JSON file
"""

import json
import runpy
import shutil
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
DELETE = object()


def assert_names(error, *names):
    message = str(getattr(error, "value", error))
    for name in names:
        assert str(name) in message, (name, message)


def run_script(monkeypatch, capsys, script, *args):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / script), *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(SCRIPTS / script), run_name="__main__")
    return stop.value.code, capsys.readouterr().err


def assert_error_line(code, err, *names, alone=False):
    """Unless alone, progress bars and transformers' own log lines may come before the error line."""
    assert code == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err
    assert not alone or err.strip() == errors[0], err
    assert_names(errors[0], *names)


def copy_folder(folder, tmp_path, name="copy") -> Path:
    return Path(shutil.copytree(folder, tmp_path / name))


def edit_json(path, **changes):
    values = json.loads(Path(path).read_text(encoding="utf-8"))
    values.update(changes)
    Path(path).write_text(json.dumps({k: v for k, v in values.items() if v is not DELETE}), encoding="utf-8")
