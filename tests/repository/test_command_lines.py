"""The scripts' command lines misused: exit status 2 and one `error: ...` line naming the fault, before torch where
it can; the right next step named."""

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import modeling_vaswani
from checks import SCRIPTS, assert_error_line, assert_names, copy_folder, run_script
from modeling_vaswani import shipped_model_path
from modeling_vaswani.cli import looks_like_hub_id, missing_model_folder
from modeling_vaswani.evaluation import translation
from modeling_vaswani.evaluation.translation import load_translator, translate

REPO = SCRIPTS.parent


def test_no_script_shadows_an_installed_module():
    """scripts/ comes first on sys.path: a script named like a library would hide it (test folders aside)."""
    assert sys.path[0] != str(SCRIPTS)
    specs = {p.name: importlib.util.find_spec(p.stem) for p in SCRIPTS.glob("*.py")}
    shadowing = [name for name, spec in specs.items() if spec is not None and not all(
        Path(place).is_relative_to(REPO / "tests") for place in spec.submodule_search_locations or [spec.origin or ""])]
    assert not shadowing, f"rename {shadowing}: each hides the installed module of the same name"


# A mistake and what its one line names; "{missing}" is a model folder that is not there. (The train.py flags'
# checks: test_train_flags.py; the other scripts': below.)
@pytest.mark.parametrize("script,args,names", [
    ("train.py", ["--num_train_epochs", "many"], ["--num_train_epochs", "many"]),
    ("train.py", ["--source_lang", "xx"], ["source_lang='xx'"]),  # the check: tests/training/test_data.py
    ("train.py", ["--model_name_or_path", "{missing}"], ["{missing}"]),
    ("average_checkpoints.py", ["--run_dir", "{missing}"], ["{missing}"]),
    ("average_checkpoints.py", ["--checkpoints", "{missing}"], ["{missing}"]),
    ("push_to_hub.py", ["--model_dir", "{missing}", "--repo_id", "user/name", "--dry_run"], ["{missing}"]),
    *[("translate.py", ["--model", "{model}", "--device", device, "Hi"], [repr(device), reason]) for device, reason in
      [("tpu9", "is not a device name"), ("gpu", "is not a device name"), ("cuda:99", "is not available here"),
       ("meta", "holds no data")]],
])
def test_a_mistake_is_one_error_line_and_writes_nothing(monkeypatch, capsys, saved_model_dir, tmp_path, script, args,
                                                        names):
    fill = dict(missing=tmp_path / "no_such_model", model=saved_model_dir)
    output = [] if script in ("translate.py", "push_to_hub.py") else ["--output_dir", tmp_path / "out"]
    code, err = run_script(monkeypatch, capsys, script, *[a.format(**fill) for a in args], *output)
    assert_error_line(code, err, *[name.format(**fill) for name in names], alone=True)
    assert not (tmp_path / "out").exists()


# Python's decoder refuses every malformed sequence alike (the reader: tests/training/test_data.py).
NOT_UTF8 = "Grüße".encode("latin-1")


def with_bad_line(data):
    return b"A dog runs.\nTwo men.\n" + data + b"\nA cat.\n"  # the bad line is line 3


def translate_input(monkeypatch, tmp_path, source, data):
    """translate.py's flags that read `data` from a file or from stdin, and the name its errors give it."""
    if source == "stdin":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        return [], "<stdin>"
    (tmp_path / "in.en").write_bytes(data)
    return ["--file", tmp_path / "in.en"], tmp_path / "in.en"


@pytest.mark.parametrize("door", ["translate --file", "translate stdin", "evaluate_model", "train"])
def test_input_that_is_not_utf8_is_named_by_file_and_line(monkeypatch, capsys, saved_model_dir, tmp_path, door):
    """evaluate_model.py's --source_file and --reference_file, and train.py's two files, are read alike."""
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_bytes(with_bad_line(b"fine"))
    bad.write_bytes(with_bad_line(NOT_UTF8))
    if door.startswith("translate"):
        args, bad = translate_input(monkeypatch, tmp_path, door.split()[1], bad.read_bytes())
        args = ["--model", saved_model_dir, "--num_beams", "1", "--max_new_tokens", "2", "--batch_size", "1", *args]
    else:
        args = {"evaluate_model": ["--model", saved_model_dir, "--source_file", good, "--reference_file", bad],
                "train": ["--train_source", bad, "--train_target", good, "--report_to", "none"]}[door]
    code, err = run_script(monkeypatch, capsys, f"{door.split()[0]}.py", *args, *(
        [] if door.startswith("translate") else ["--output_dir", tmp_path / "out"]))
    assert_error_line(code, err, f"{bad}, line 3", "UTF-8", alone=not door.startswith("translate"))


LINE_BREAK_LOOKALIKES = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


# Scripts, emoji and characters that a tokenizer or a writer might take apart.
ODD_TEXT = ["Ein Hund 🐕 läuft über die Wiese.", "一只狗在雪地里奔跑。", "كلب يجري في الثلج",
            "Ζώο τρέχει — «εδώ» 🏃‍♀️🏽", "e\u0301 combining, zero\u200bwidth, ＦＵＬＬＷＩＤＴＨ", "🙂🙃🙂"]


@pytest.mark.parametrize("source", ["--file", "stdin"])
def test_translate_keeps_one_output_line_per_input_line_and_warns_of_cut_ones(monkeypatch, capsys, caplog,
                                                                              saved_model_dir, tmp_path, source):
    lines = [f"A dog{char}runs." for char in LINE_BREAK_LOOKALIKES] + ["A man.\r", "dog " * 600, *ODD_TEXT]
    args, _ = translate_input(monkeypatch, tmp_path, source, ("\n".join(lines) + "\n").encode("utf-8"))
    logger = "modeling_vaswani.evaluation.translation"
    with caplog.at_level("WARNING", logger=logger):
        assert run_script(monkeypatch, capsys, "translate.py", "--model", saved_model_dir, "--num_beams", "1",
                          "--max_new_tokens", "3", "--batch_size", "4", "--output", tmp_path / "out.de", *args)[0] == 0
    written = (tmp_path / "out.de").read_bytes().decode("utf-8")
    assert written.endswith("\n") and written.count("\n") == len(lines)
    (warning,) = [r.getMessage() for r in caplog.records if r.name == logger and "were cut" in r.getMessage()]
    assert_names(warning, f"1 of {len(lines)} sentences", "512 tokens")


# --- the first hour: answers before the heavy imports, and the next step ---------------------------------

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
# transformers' HfArgumentParser: above.)
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
    assert_error_line(result.returncode, result.stderr, *FLAG_ERRORS[command].split(), alone=True)


@pytest.mark.parametrize("script", ["translate.py", "evaluate_model.py", "convert_marian.py", "export_marian.py"])
@pytest.mark.parametrize("name", ["./no-such-model", "hub_card"])  # every spelling: load_translator's test below
def test_a_missing_local_model_is_refused_before_any_heavy_import(tmp_path, script, name):
    extra = {"translate.py": ["Hello"], "evaluate_model.py": []}.get(script, ["--output_dir", tmp_path / "out"])
    result = run_light(script, "--model", name, *extra, cwd=tmp_path)  # hub_card is not in tmp_path
    assert_error_line(result.returncode, result.stderr, f"--model {name}: no such model folder",
                      os.path.abspath(tmp_path / name), alone=True)


def test_the_numbers_written_into_the_scripts_are_the_package_s():
    from modeling_vaswani.model import generation

    # §6.1's decoding numbers are not written into evaluate_model.py: its defaults are the model's own.
    source = (SCRIPTS / "evaluate_model.py").read_text(encoding="utf-8")
    assert "default=NUM_BEAMS" not in source and "= 4, 0.6, 50" not in source and generation.NUM_BEAMS == 4


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
    with pytest.raises(FileNotFoundError, match="installed package"):
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

