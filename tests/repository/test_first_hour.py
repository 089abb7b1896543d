"""What a newcomer runs from the README answers promptly and quietly, and names the right next step.

- Every script's --help, and a wrong flag, answer before torch, transformers or datasets are
  imported (the package's own import takes seconds; parsing the arguments, a fraction of one).
- The shipped model is found from any directory; a name that can only be a local path and is not
  there is refused at once, in one line, without asking the Hub.
- Loading a model shows no progress bar; evaluate_model.py records the CPU threads it used.
- push_to_hub.py names scripts/collect_results.py (with the right folders) when results.json is
  missing, and its --dry_run warns about, instead of refusing, a model that translates the
  example to an empty line.
"""

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from checks import assert_names
import modeling_vaswani
from modeling_vaswani import shipped_model_path
from modeling_vaswani.evaluation.translation import load_translator, translate

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
# The scripts a newcomer meets (train.py parses with transformers' HfArgumentParser and is not here).
QUICK_SCRIPTS = ["translate.py", "evaluate_model.py", "collect_results.py", "push_to_hub.py",
                 "average_checkpoints.py", "plot_training_curve.py", "convert_marian.py", "export_marian.py"]
# Blocking transformers also keeps out the package's __init__, which imports it.
HEAVY = ("torch", "transformers", "datasets", "evaluate", "matplotlib", "huggingface_hub", "tokenizers")

# Run a script as `python scripts/<name>` does (scripts/ first on sys.path), with the heavy
# libraries made unimportable: importing any of them fails the run.
_WITHOUT_HEAVY = """
import runpy, sys
for name in {heavy!r}:
    sys.modules[name] = None
sys.path.insert(0, {scripts!r})
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_light(script, *args, cwd=REPO):
    code = _WITHOUT_HEAVY.format(heavy=HEAVY, scripts=str(SCRIPTS))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, str(SCRIPTS / script), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("script", QUICK_SCRIPTS)
def test_help_imports_no_heavy_library(script):
    result = run_light(script, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:") and not result.stderr


@pytest.mark.parametrize("script,args,flag", [
    ("translate.py", ["--batch_size", "0"], "--batch_size"),
    ("evaluate_model.py", ["--threads", "0"], "--threads"),
    ("collect_results.py", ["--run_dir", "r", "--splits", "dev"], "--splits"),
    ("push_to_hub.py", ["--model_dir", "m"], "--repo_id"),
    ("average_checkpoints.py", ["--run_dir", "r", "--last", "x"], "--last"),
    ("plot_training_curve.py", ["--run_dir", "r"], "--output"),
    ("convert_marian.py", ["--model", "m"], "--output_dir"),
    ("export_marian.py", ["--model", "m", "--output_dir", "o", "--nope"], "--nope"),
])
def test_a_wrong_flag_is_answered_before_any_heavy_import(script, args, flag):
    result = run_light(script, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and flag in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("script", ["translate.py", "evaluate_model.py", "convert_marian.py", "export_marian.py"])
@pytest.mark.parametrize("name", ["./no-such-model", "../no-such-model", "no-such-model", "/no/such/model", "hub_card"])
def test_a_missing_local_model_is_refused_before_any_heavy_import(tmp_path, script, name):
    extra = {"translate.py": ["Hello"], "convert_marian.py": ["--output_dir", tmp_path / "out"],
             "export_marian.py": ["--output_dir", tmp_path / "out"]}.get(script, [])
    result = run_light(script, "--model", name, *extra, cwd=tmp_path)  # hub_card is not in tmp_path
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --model {name}: no such model folder")
    assert os.path.abspath(tmp_path / name) in lines[0]


@pytest.mark.parametrize("script", QUICK_SCRIPTS)
def test_help_answers_without_the_package(script):
    # Promptness shown without a clock (a loaded machine is slow at random): the package, and with it
    # torch and transformers, is never imported for --help.
    probe = ("import runpy, sys; sys.argv = [sys.argv[1], '--help']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print('HEAVY' if {'torch', 'transformers', 'modeling_vaswani'} & set(sys.modules) else 'LIGHT')")
    result = subprocess.run([sys.executable, "-c", probe, str(SCRIPTS / script)], cwd=SCRIPTS, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "LIGHT"


def test_the_numbers_written_into_the_scripts_are_the_package_s(load_module):
    from modeling_vaswani.model import generation
    from modeling_vaswani.training.checkpoint_averaging import BASE_CHECKPOINTS
    from modeling_vaswani.training.data import SPLIT_NAMES

    # §6.1's decoding numbers are not written into evaluate_model.py: its defaults are the model's own.
    source = (SCRIPTS / "evaluate_model.py").read_text(encoding="utf-8")
    assert "default=NUM_BEAMS" not in source and "= 4, 0.6, 50" not in source
    assert generation.NUM_BEAMS == 4
    assert list(load_module(SCRIPTS / "collect_results.py").SPLITS) == sorted(SPLIT_NAMES)
    assert load_module(SCRIPTS / "average_checkpoints.py").BASE_CHECKPOINTS == BASE_CHECKPOINTS


# --- the shipped model, from anywhere ------------------------------------------------------------

def test_the_shipped_model_is_found_from_another_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    folder = shipped_model_path()
    assert folder == modeling_vaswani.SHIPPED_MODEL == str(REPO / "hub_card")
    model, tokenizer = load_translator(folder, device="cpu")
    assert translate(model, tokenizer, ["Two dogs are playing in the snow."], num_beams=1)[0].strip()
    assert "Loading weights" not in capsys.readouterr().err  # loading is quiet


def test_without_the_repository_the_shipped_model_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(modeling_vaswani, "SHIPPED_MODEL", str(tmp_path / "site-packages" / "hub_card"))
    with pytest.raises(FileNotFoundError, match="comes with the repository, not with the installed package"):
        shipped_model_path()


def _no_hub(*args, **kwargs):
    raise AssertionError("the Hub was asked for a name that can only be a local path")


@pytest.mark.parametrize("name", ["./x", "../x", "/no/such/x", "x", "hub_card", "a/b/c"])
def test_load_translator_refuses_a_missing_local_path_without_asking_the_hub(tmp_path, monkeypatch, name):
    from modeling_vaswani.evaluation import translation

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(translation.AutoModelForSeq2SeqLM, "from_pretrained", _no_hub)
    monkeypatch.setattr(translation.PretrainedConfig, "get_config_dict", _no_hub)
    with pytest.raises(FileNotFoundError, match="no such model folder") as error:
        load_translator(name, device="cpu")
    message = str(error.value)
    assert "\n" not in message and os.path.abspath(name) in message
    assert ("shipped_model_path()" in message) == (name == "hub_card")


def test_namespace_slash_name_is_local_when_the_namespace_folder_is_here(tmp_path, monkeypatch):
    from modeling_vaswani.cli import missing_model_folder

    monkeypatch.chdir(tmp_path)
    assert missing_model_folder("outputs/run") is None  # may be a Hub id
    (tmp_path / "outputs").mkdir()
    assert "no such model folder" in missing_model_folder("outputs/run")  # a typo after the first training run


@pytest.mark.parametrize("name,hub", [("user/name", True), ("Org-1/model.v2_x", True), ("./x", False),
                                      ("../x", False), ("/x/y", False), ("x", False), ("a/b/c", False),
                                      ("a..b/c", False), ("a--b/c", False), ("a b/c", False), ("~/x", False)])
def test_one_hub_id_rule(name, hub):
    from modeling_vaswani.cli import looks_like_hub_id

    assert looks_like_hub_id(name) is hub


def test_a_hub_id_that_does_not_load_says_it_is_no_local_folder_either(tmp_path, monkeypatch):
    from modeling_vaswani.evaluation import translation

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(translation.AutoModelForSeq2SeqLM, "from_pretrained", offline)
    with pytest.raises(FileNotFoundError) as error:
        load_translator("outputs/run", device="cpu")
    assert_names(error, "'outputs/run'", "We couldn't connect")


def test_loading_leaves_transformers_progress_bars_and_logging_as_they_were():
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    load_translator(shipped_model_path(), device="cpu")
    assert (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()) == before


def test_the_readme_snippets_name_the_shipped_model_not_a_relative_folder():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    python = "\n".join(re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M))
    assert "shipped_model_path()" in python
    assert not re.search(r"""["']hub_card["']""", python)


# --- evaluate_model.py records its threads -------------------------------------------------------

@pytest.fixture
def torch_threads():
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("flags,threads,chosen_by", [([], 1, "the model has under 20M parameters"),
                                                     (["--threads", "2"], 2, "--threads")])
def test_evaluation_records_the_threads_it_used(tmp_path, monkeypatch, capsys, torch_threads, flags, threads,
                                                chosen_by, load_module):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.chdir(tmp_path)  # the shipped model is the default, from any directory
    text = tmp_path / "test.en"
    text.write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    load_module(SCRIPTS / "evaluate_model.py").main(
        ["--source_file", str(text), "--reference_file", str(text), "--num_beams", "1", "--max_new_tokens", "3",
         "--output_dir", str(tmp_path / "out"), *flags])
    scores = json.loads((tmp_path / "out" / "custom-beam1.scores.json").read_text())
    assert (scores["threads"], scores["threads_chosen_by"]) == (threads, chosen_by)
    assert scores["model"] == shipped_model_path() and "length_penalty" not in scores  # greedy search has none
    captured = capsys.readouterr()
    assert f"({threads} thread" in captured.out
    assert not captured.err  # no bar off a terminal, no loading messages, no warning about unused flags


# --- push_to_hub.py: the next step, and a model that translates to nothing -----------------------

def run_push(monkeypatch, capsys, *args):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / "push_to_hub.py"), *map(str, args)])
    try:
        runpy.run_path(str(SCRIPTS / "push_to_hub.py"), run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def _model_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


@pytest.mark.parametrize("layout", ["averaged", "other-name", "run-itself", "run-without-averaged", "elsewhere"])
def test_missing_results_names_collect_results_with_the_right_folders(tmp_path, monkeypatch, capsys, layout):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text("{}")
    model_dir, expected = {
        "averaged": (run / "averaged", f"next: python scripts/collect_results.py --run_dir {run}"),
        "other-name": (run / "best", f"next: python scripts/collect_results.py --run_dir {run} --shipped {run / 'best'}"),
        "run-itself": (run, f"next: python scripts/collect_results.py --run_dir {run}"),
        "run-without-averaged": (run, f"next: python scripts/average_checkpoints.py --run_dir {run}"),
        "elsewhere": (tmp_path / "converted",
                      f"--run_dir RUN_DIR --shipped {tmp_path / 'converted'}, RUN_DIR the output folder"),
    }[layout]
    if layout != "run-itself" and layout != "run-without-averaged":
        _model_folder(model_dir)
    if layout == "run-itself":
        _model_folder(run / "averaged")
    code, err = run_push(monkeypatch, capsys, "--model_dir", model_dir, "--repo_id", "you/name", "--dry_run")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert expected in err and "evaluate_model.py" not in err


def test_dry_run_warns_about_a_model_that_translates_to_an_empty_line(tmp_path, monkeypatch, capsys):
    """A briefly trained model translates the example to ""; --dry_run used to refuse it outright."""
    import shutil

    from modeling_vaswani.hub import repository

    model_dir = Path(shutil.copytree(REPO / "hub_card", tmp_path / "model"))
    clean_process = subprocess.CompletedProcess([], 0, stdout=json.dumps({"class": "x", "generate": "",
                                                                          "pipeline": ""}), stderr="")
    monkeypatch.setattr(repository.subprocess, "run", lambda *args, **kwargs: clean_process)
    code, err = run_push(monkeypatch, capsys, "--model_dir", model_dir, "--repo_id", "you/name", "--dry_run",
                         "--output_dir", tmp_path / "repo")
    assert code == 0, err
    assert err.startswith("warning: ") and "empty line" in err and len(err.strip().splitlines()) == 1  # nothing else
    assert (tmp_path / "repo" / "README.md").is_file()
    # Without --dry_run it is refused before anything is uploaded.
    code, err = run_push(monkeypatch, capsys, "--model_dir", model_dir, "--repo_id", "you/name",
                         "--output_dir", tmp_path / "repo2")
    assert code == 2 and "to an empty string" in err


def test_push_help_names_the_current_login_command():
    result = run_light("push_to_hub.py", "--help")
    assert "hf auth login" in result.stdout and "huggingface-cli" not in result.stdout
