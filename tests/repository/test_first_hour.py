"""What a newcomer runs from the README answers at once, in one `error:` line before torch is imported
where it can, and names the right next step."""

import json
import os
import subprocess
import sys

import pytest

import modeling_vaswani
from checks import SCRIPTS, assert_names, copy_folder, run_script
from modeling_vaswani import shipped_model_path
from modeling_vaswani.cli import looks_like_hub_id, missing_model_folder
from modeling_vaswani.evaluation import translation
from modeling_vaswani.evaluation.translation import load_translator, translate

REPO = SCRIPTS.parent
# Run as `python scripts/<name>` (scripts/ first on sys.path), the heavy libraries made unimportable;
# blocking transformers keeps out the package's __init__ too, which imports it.
_WITHOUT_HEAVY = """
import runpy, sys
for name in ("torch", "transformers", "datasets", "evaluate", "matplotlib", "huggingface_hub", "tokenizers"):
    sys.modules[name] = None
sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
LIGHT_SCRIPTS = sorted(p.name for p in SCRIPTS.glob("[a-z]*.py") if p.name not in ("train.py", "table3.py"))


def run_light(script, *args, cwd=REPO):
    return subprocess.run([sys.executable, "-c", _WITHOUT_HEAVY, str(SCRIPTS), str(SCRIPTS / script),
                           *map(str, args)], cwd=cwd, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("script", LIGHT_SCRIPTS)
def test_help_answers_before_any_heavy_import(script):
    result = run_light(script, "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage:") and not result.stderr, result.stderr
    if script == "push_to_hub.py":
        assert "hf auth login" in result.stdout and "huggingface-cli" not in result.stdout


# A wrong flag, value or combination, and the words its one error line names. (train.py parses with
# transformers' HfArgumentParser: test_command_lines.py.)
FLAG_ERRORS = {
    "translate.py --batch_size 0": "--batch_size 0", "translate.py --batch_size many": "--batch_size many",
    "translate.py --max_new_tokens 0": "--max_new_tokens 0", "translate.py --num_beams 0": "--num_beams 0",
    "translate.py --bad 3": "--bad", "evaluate_model.py --threads 0": "--threads 0",
    "evaluate_model.py --model m --num_beams -2": "--num_beams -2",
    "evaluate_model.py --model m --max_samples -1": "--max_samples -1",
    "evaluate_model.py --model m --max_new_tokens 0": "--max_new_tokens 0",
    "evaluate_model.py --model m --batch_size -3": "--batch_size -3", "evaluate_model.py --model m --bad 3": "--bad",
    "collect_results.py --run_dir r --splits dev": "--splits dev",
    "collect_results.py --run_dir r --batch_size 0": "--batch_size 0",
    "push_to_hub.py --model_dir m": "--repo_id", "push_to_hub.py --model_dir m --repo_id user/name --bad 3": "--bad",
    "average_checkpoints.py --run_dir r --last x": "--last x",
    "average_checkpoints.py --checkpoints a --output_dir o --bad 3": "--bad",
    "average_checkpoints.py --checkpoints a --run_dir b --output_dir o": "--checkpoints --run_dir",
    "plot_training_curve.py --run_dir r": "--output", "convert_marian.py --model m": "--output_dir",
    "export_marian.py --model m --output_dir o --nope": "--nope",
}


@pytest.mark.parametrize("command", list(FLAG_ERRORS))
def test_a_flag_mistake_is_one_error_line_before_any_heavy_import(command):
    result = run_light(*command.split())
    assert result.returncode == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, \
        result.stderr
    assert_names(result.stderr, *FLAG_ERRORS[command].split())
    if command == "translate.py --num_beams 0":  # the one case that pins wording: what a user reads
        assert result.stderr.startswith("error: argument --num_beams: expected a positive integer")


@pytest.mark.parametrize("script", ["translate.py", "evaluate_model.py", "convert_marian.py", "export_marian.py"])
@pytest.mark.parametrize("name", ["./no-such-model", "hub_card"])  # every spelling: load_translator's test below
def test_a_missing_local_model_is_refused_before_any_heavy_import(tmp_path, script, name):
    extra = {"translate.py": ["Hello"], "evaluate_model.py": []}.get(script, ["--output_dir", tmp_path / "out"])
    result = run_light(script, "--model", name, *extra, cwd=tmp_path)  # hub_card is not in tmp_path
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: --model {name}: no such model folder")
    assert os.path.abspath(tmp_path / name) in lines[0]


def test_the_numbers_written_into_the_scripts_are_the_package_s(load_module):
    from modeling_vaswani.model import generation
    from modeling_vaswani.training.checkpoint_averaging import BASE_CHECKPOINTS
    from modeling_vaswani.training.data import SPLIT_NAMES

    # §6.1's decoding numbers are not written into evaluate_model.py: its defaults are the model's own.
    source = (SCRIPTS / "evaluate_model.py").read_text(encoding="utf-8")
    assert "default=NUM_BEAMS" not in source and "= 4, 0.6, 50" not in source and generation.NUM_BEAMS == 4
    assert list(load_module(SCRIPTS / "collect_results.py").SPLITS) == sorted(SPLIT_NAMES)
    assert load_module(SCRIPTS / "average_checkpoints.py").BASE_CHECKPOINTS == BASE_CHECKPOINTS


def test_the_shipped_model_is_found_from_another_directory_and_loads_quietly(tmp_path, monkeypatch, capsys):
    from transformers.utils import logging as hf_logging

    monkeypatch.chdir(tmp_path)
    assert shipped_model_path() == modeling_vaswani.SHIPPED_MODEL == str(REPO / "hub_card")
    before = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    model, tokenizer = load_translator(shipped_model_path(), device="cpu")
    assert (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()) == before  # left as they were
    assert translate(model, tokenizer, ["Two dogs are playing in the snow."], num_beams=1)[0].strip()
    assert "Loading weights" not in capsys.readouterr().err
    monkeypatch.setattr(modeling_vaswani, "SHIPPED_MODEL", str(tmp_path / "site-packages" / "hub_card"))
    with pytest.raises(FileNotFoundError, match="comes with the repository, not with the installed package"):
        shipped_model_path()


def _no_hub(*args, **kwargs):
    raise AssertionError("the Hub was asked for a name that can only be a local path")


@pytest.mark.parametrize("name", ["./x", "../x", "/no/such/x", "x", "hub_card", "a/b/c"])
def test_load_translator_refuses_a_missing_local_path_without_asking_the_hub(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(translation.AutoModelForSeq2SeqLM, "from_pretrained", _no_hub)
    monkeypatch.setattr(translation.PretrainedConfig, "get_config_dict", _no_hub)
    with pytest.raises(FileNotFoundError) as error:
        load_translator(name, device="cpu")
    assert "\n" not in str(error.value) and os.path.abspath(name) in str(error.value)
    assert ("shipped_model_path()" in str(error.value)) == (name == "hub_card")


@pytest.mark.parametrize("name,hub", [("user/name", True), ("Org-1/model.v2_x", True), ("./x", False),
                                      ("../x", False), ("/x/y", False), ("x", False), ("a/b/c", False),
                                      ("a..b/c", False), ("a--b/c", False), ("a b/c", False), ("~/x", False)])
def test_one_hub_id_rule(name, hub):
    assert looks_like_hub_id(name) is hub


def test_namespace_slash_name_is_a_hub_id_unless_the_namespace_folder_is_here(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(translation.AutoModelForSeq2SeqLM, "from_pretrained", offline)
    assert missing_model_folder("outputs/run") is None
    with pytest.raises(FileNotFoundError) as error:  # a Hub id that does not load says it is no local folder either
        load_translator("outputs/run", device="cpu")
    assert_names(error, "'outputs/run'", "We couldn't connect")
    (tmp_path / "outputs").mkdir()
    assert "no such model folder" in missing_model_folder("outputs/run")  # a typo after the first training run


@pytest.mark.parametrize("layout", ["averaged", "other-name", "run-itself", "run-without-averaged", "elsewhere"])
def test_missing_results_names_collect_results_with_the_right_folders(tmp_path, monkeypatch, capsys, layout):
    run = tmp_path / "run"
    model_dir, expected = {
        "averaged": (run / "averaged", f"next: python scripts/collect_results.py --run_dir {run}"),
        "other-name": (run / "best",
                       f"next: python scripts/collect_results.py --run_dir {run} --shipped {run / 'best'}"),
        "run-itself": (run, f"next: python scripts/collect_results.py --run_dir {run}"),
        "run-without-averaged": (run, f"next: python scripts/average_checkpoints.py --run_dir {run}"),
        "elsewhere": (tmp_path / "converted",
                      f"--run_dir RUN_DIR --shipped {tmp_path / 'converted'}, RUN_DIR the output folder"),
    }[layout]
    run.mkdir()
    (run / "trainer_state.json").write_text("{}")
    for model in {"run-itself": [run / "averaged"], "run-without-averaged": []}.get(layout, [model_dir]):
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    code, err = run_script(monkeypatch, capsys, "push_to_hub.py", "--model_dir", model_dir, "--repo_id", "you/name",
                           "--dry_run")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert expected in err and "evaluate_model.py" not in err


def test_dry_run_warns_about_a_model_that_translates_to_an_empty_line(tmp_path, monkeypatch, capsys):
    """A briefly trained model translates the example to ""; --dry_run used to refuse it outright."""
    from modeling_vaswani.hub import repository

    model_dir = copy_folder(REPO / "hub_card", tmp_path, "model")
    clean_process = subprocess.CompletedProcess([], 0, stdout=json.dumps({"class": "x", "generate": "",
                                                                          "pipeline": ""}), stderr="")
    monkeypatch.setattr(repository.subprocess, "run", lambda *args, **kwargs: clean_process)
    push = ["push_to_hub.py", "--model_dir", model_dir, "--repo_id", "you/name", "--output_dir"]
    code, err = run_script(monkeypatch, capsys, *push, tmp_path / "repo", "--dry_run")
    assert code == 0 and err.startswith("warning: ") and "empty line" in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / "repo" / "README.md").is_file()
    code, err = run_script(monkeypatch, capsys, *push, tmp_path / "repo2")  # without --dry_run: refused, not uploaded
    assert code == 2 and "to an empty string" in err

