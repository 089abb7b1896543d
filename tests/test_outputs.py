"""outputs.py: no script (DOORS: every output flag) writes over what it reads; no output is left half-written."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checks import CHILD_ENV, SCRIPTS, assert_error_line, run_script
from modeling_vaswani import outputs


def _model(tmp_path, model):
    return Path(shutil.copytree(model, tmp_path / "model"))


def _text(tmp_path, model):
    (tmp_path / "text.en").write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    return tmp_path / "text.en"


def _model_with_results(tmp_path, model):
    folder = _model(tmp_path, model)
    (folder / "results.json").write_text("{}", encoding="utf-8")
    return folder


def _run_with_average(tmp_path, model):
    run = _model(tmp_path, model)
    shutil.copytree(model, run / "averaged")
    return run


def _trainer_state(tmp_path, model):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trainer_state.json").write_text(json.dumps({"log_history": []}), encoding="utf-8")
    return tmp_path / "run" / "trainer_state.json"


def _runs_folder(tmp_path, model):
    (tmp_path / "runs" / "base").mkdir(parents=True)
    return tmp_path / "runs"


# "<script> <flag>": (output is a folder, makes the input it reads, its command line for input, output, a model)
DOORS = {
    "translate --output": (False, _text, lambda i, o, m: ["--model", m, "--file", i, "--output", o]),
    "evaluate_model --output_dir": (True, _model, lambda i, o, m: ["--model", i, "--output_dir", o]),
    "collect_results --output_dir": (True, _run_with_average, lambda i, o, m: ["--run_dir", i, "--output_dir", o]),
    "average_checkpoints --output_dir": (True, _model, lambda i, o, m: ["--checkpoints", i, m, "--output_dir", o]),
    "push_to_hub --output_dir": (True, _model_with_results, lambda i, o, m: [
        "--model_dir", i, "--repo_id", "you/name", "--dry_run", "--output_dir", o]),
    "push_to_hub --space_dir": (True, _model_with_results, lambda i, o, m: [
        "--model_dir", i, "--repo_id", "you/name", "--dry_run", "--space", "you/space", "--space_dir", o]),
    "convert_ctranslate2 --output_dir": (True, _model, lambda i, o, m: ["--model", i, "--output_dir", o, "--force"]),
    "convert_marian --output_dir": (True, _model, lambda i, o, m: ["--model", i, "--output_dir", o]),
    "export_marian --output_dir": (True, _model, lambda i, o, m: ["--model", i, "--output_dir", o]),
    "plot_training_curve --output": (False, _trainer_state, lambda i, o, m: ["--run_dir", i.parent, "--output", o]),
    "table3 --output": (True, _runs_folder, lambda i, o, m: [
        "--steps", "1", "--rows", "A", "--output", o, "--runs_dir", i]),
    "train --output_dir": (True, _model, lambda i, o, m: [
        "--model_name_or_path", i, "--output_dir", o, "--overwrite_output_dir", "--report_to", "none"]),
}


def _link(path, make):
    link = path.with_name("link-" + path.name)
    make(path, link)
    return link


# Where an output is pointed, from the input it must not touch.
SPELLINGS = {
    "same": lambda path: path,
    "other-spelling": lambda path: path.parent / "." / ".." / path.parent.name / path.name,
    "symlink": lambda path: _link(path, os.symlink),
    "hardlink": lambda path: _link(path, os.link),  # files only
    "inside": lambda path: path / "out",  # folders only
    "around": lambda path: path.parent,  # folder outputs only
}


def _snapshot(path: Path) -> dict:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _cases():
    for door, (folder, make, _) in DOORS.items():
        reads_folder = make not in (_text, _trainer_state)
        for spelling in SPELLINGS:
            if (spelling == "hardlink" and reads_folder) or (spelling == "inside" and not reads_folder) or (
                    spelling == "around" and not folder):
                continue
            yield pytest.param(door, spelling, id=f"{door}-{spelling}")
        yield pytest.param(door, "shipped", id=f"{door}-shipped")  # into the shipped model, from another input


@pytest.mark.parametrize("door, spelling", list(_cases()))
def test_an_output_never_writes_over_what_the_run_reads_or_the_shipped_model(door, spelling, saved_model_dir,
                                                                              tmp_path, monkeypatch, capsys):
    (script, flag), (folder, make, command) = door.split(), DOORS[door]
    shipped = Path(shutil.copytree(saved_model_dir, tmp_path / "hub_card"))
    monkeypatch.setattr(outputs, "SHIPPED_MODEL", shipped)  # the real one is never pointed at
    monkeypatch.chdir(tmp_path)
    source = make(tmp_path, saved_model_dir)
    other_model = Path(shutil.copytree(saved_model_dir, tmp_path / "other" / "model"))
    kept = shipped if spelling == "shipped" else source
    before = _snapshot(kept)
    output = (shipped if folder else shipped / "out.txt") if spelling == "shipped" else SPELLINGS[spelling](source)
    code, err = run_script(monkeypatch, capsys, f"{script}.py", *command(source, output, other_model))
    assert_error_line(code, err, f"{flag} {output}", *["shipped model"] * (spelling == "shipped"))
    assert _snapshot(kept) == before


@pytest.mark.parametrize("redirect", ["stdin", "stdout"])
def test_standard_streams_count_as_what_is_read_and_written(tmp_path, redirect):
    """`translate.py --output x < x` used to empty x and exit 0; `--file x > x` translated an emptied file."""
    text = tmp_path / "x"
    text.write_text("A dog runs.\n", encoding="utf-8")
    args = ["--output", str(text)] if redirect == "stdin" else ["--file", str(text)]
    with open(text, "r+b") as stream:
        if redirect == "stdout":
            stream.seek(0, os.SEEK_END)  # appended to, so the file the shell would have emptied stays readable
        result = subprocess.run([sys.executable, str(SCRIPTS / "translate.py"), *args],
                                stdin=stream if redirect == "stdin" else subprocess.DEVNULL,
                                stdout=stream if redirect == "stdout" else subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=CHILD_ENV)
    assert result.returncode == 2 and result.stderr.startswith("error: "), result.stderr
    assert ("--output" if redirect == "stdin" else "standard output") in result.stderr
    assert text.read_text(encoding="utf-8") == "A dog runs.\n"


# --- whole or not at all ---------------------------------------------------------------------------------


@pytest.mark.parametrize("error, keep, left", [(ZeroDivisionError, True, "earlier\n"),
                                               (KeyboardInterrupt, False, "earlier\n"),
                                               (KeyboardInterrupt, True, "first line\n")])
def test_a_failed_write_leaves_the_earlier_file_or_when_stopped_and_asked_its_finished_part(tmp_path, error, keep,
                                                                                          left):
    target = tmp_path / "out.txt"
    target.write_text("earlier\n")
    with pytest.raises(error):
        with outputs.write_file(target, keep_on_interrupt=keep) as handle:
            handle.write("first line\n")
            raise error
    assert target.read_text() == left and os.listdir(tmp_path) == ["out.txt"]  # no temporary left
    with outputs.write_file(target) as handle:
        handle.write("new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["out.txt"]


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.txt").write_text("earlier")
    with pytest.raises(ZeroDivisionError):
        with outputs.write_folder(target) as folder:
            (folder / "new.txt").write_text("half")
            1 / 0
    assert os.listdir(target) == ["old.txt"] and os.listdir(tmp_path) == ["model"]
    with outputs.write_folder(target) as folder:
        (folder / "new.txt").write_text("complete")
    assert os.listdir(target) == ["new.txt"] and os.listdir(tmp_path) == ["model"]


def test_an_output_already_there_is_replaced_only_when_asked(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="--force"):
        outputs.claim("--output_dir", tmp_path / "full", folder=True, replace_flag="--force", replace=False)
    assert outputs.claim("--output_dir", tmp_path / "full", folder=True, replace_flag="--force", replace=True)
