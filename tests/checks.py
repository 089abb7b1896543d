"""Assertions, folder edits, a hostile pickle and a padded batch shared by the tests (`from checks import ...`)."""

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import torch

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
# A child process that imports this checkout, offline and single-threaded.
CHILD_ENV = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(SCRIPTS.parent))
DELETE = object()  # edit_json(path, field=DELETE) removes the field
# A padded batch of the tiny model's ids (<pad> 0, <s> 1, </s> 2): sentence 0 is shorter than sentence 1.
EOS = 2
SOURCE = torch.tensor([[5, 6, 7, 8, EOS, 0, 0], [9, 10, 11, 12, 13, 14, EOS]])
SOURCE_MASK = (SOURCE != 0).long()
TARGET = torch.tensor([[1, 5, 6, 7, 8], [1, 9, 10, 11, 12]])  # decoder inputs, from <s>


def assert_names(error, *names):
    """The message of `error` (a pytest ExceptionInfo, an exception or a string) names each of `names`."""
    message = str(getattr(error, "value", error))
    for name in names:
        assert str(name) in message, (name, message)


def run_script(monkeypatch, capsys, script, *args):
    """`python scripts/<script> args`, in this process: (exit code, stderr)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / script), *map(str, args)])
    try:
        runpy.run_path(str(SCRIPTS / script), run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def assert_error_line(code, err, *names, alone=False):
    """Exit status 2, no traceback, one `error: ...` line naming `names`, last on stderr (alone: the only line)."""
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and "Traceback" not in err and len(errors) == 1, err
    assert err.strip().splitlines()[-1] == errors[0] and (not alone or err.strip() == errors[0]), err
    assert_names(errors[0], *names)


def run_without_package(code, folder, tmp_path, cwd, isolated=False) -> dict:
    """`code` filling a dict `report`, run offline on `folder` (sys.argv[1]) in a fresh interpreter (isolated:
    -I) where `import modeling_vaswani` fails; the report, with the child's stdout."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    code = (f"import sys; sys.modules['modeling_vaswani'] = None\nimport json\n{code}\nreport['imported'] = [name for "
            "name, module in sys.modules.items() if name.startswith('modeling_vaswani') and module]\n"
            "print(json.dumps(report))")
    completed = subprocess.run([sys.executable, *(["-I"] if isolated else []), "-c", code, str(folder)], cwd=cwd,
                               env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report.pop("imported") == []
    return {**report, "stdout": completed.stdout}


def hostile_pickle(marker) -> bytes:
    """A pickle (protocol 0, by hand) that creates `marker` when unpickled."""
    return f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode()


def copy_folder(folder, tmp_path, name="copy") -> Path:
    return Path(shutil.copytree(folder, tmp_path / name))


def edit_json(path, **changes):
    values = {**json.loads(Path(path).read_text(encoding="utf-8")), **changes}
    Path(path).write_text(json.dumps({k: v for k, v in values.items() if v is not DELETE}), encoding="utf-8")
