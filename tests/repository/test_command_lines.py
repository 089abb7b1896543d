"""The scripts' command lines misused: exit status 2 and one `error: ...` line naming what is at fault.
(Damaged model folders given to a script: tests/untrusted_folders/test_damaged_folders.py.)"""

import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import pytest

from checks import CHILD_ENV, SCRIPTS, assert_error_line, run_script

REPO = SCRIPTS.parent


def test_no_script_shadows_an_installed_module():
    """`python scripts/x.py` puts scripts/ first on sys.path: a script named like a library (evaluate.py)
    would be imported in its place by every script there. Test folders (tests/benchmarks/table3) do not count."""
    assert sys.path[0] != str(SCRIPTS)
    specs = {p.name: importlib.util.find_spec(p.stem) for p in SCRIPTS.glob("*.py")}
    shadowing = [name for name, spec in specs.items() if spec is not None and not all(
        Path(place).is_relative_to(REPO / "tests") for place in spec.submodule_search_locations or [spec.origin or ""])]
    assert not shadowing, f"rename {shadowing}: each hides the installed module of the same name"


def test_train_flag_mistake(monkeypatch, capsys):
    """The line train.py prints (its flags' checks: test_train_flags.py; the other scripts': test_first_hour.py)."""
    code, err = run_script(monkeypatch, capsys, "train.py", "--num_train_epochs", "many")
    assert_error_line(code, err, "--num_train_epochs", "many", alone=True)


@pytest.mark.parametrize("script,args", [  # (translate.py's and evaluate_model.py's: test_first_hour.py)
    ("train.py", ["--model_name_or_path", "{missing}", "--output_dir", "{tmp}/out"]),
    ("average_checkpoints.py", ["--run_dir", "{missing}", "--output_dir", "{tmp}/out"]),
    ("average_checkpoints.py", ["--checkpoints", "{missing}", "--output_dir", "{tmp}/out"]),
    ("push_to_hub.py", ["--model_dir", "{missing}", "--repo_id", "user/name", "--dry_run"]),
])
def test_missing_model(monkeypatch, capsys, tmp_path, script, args):
    missing = tmp_path / "no_such_model"
    code, err = run_script(monkeypatch, capsys, script, *[a.format(missing=missing, tmp=tmp_path) for a in args])
    assert_error_line(code, err, missing, alone=True)
    assert not (tmp_path / "out").exists()


def test_wrong_language_code(monkeypatch, capsys, tmp_path):
    """One script's line; the check, which evaluate_model.py makes too: tests/training/test_data.py."""
    code, err = run_script(monkeypatch, capsys, "train.py", "--source_lang", "xx", "--output_dir", tmp_path / "out")
    assert_error_line(code, err, "source_lang='xx'", alone=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("device,reason", [("tpu9", "is not a device name"), ("gpu", "is not a device name"),
                                           ("cuda:99", "is not available here"), ("meta", "holds no data")])
def test_device_that_does_not_exist(monkeypatch, capsys, saved_model_dir, device, reason):
    code, err = run_script(monkeypatch, capsys, "translate.py", "--model", saved_model_dir, "--device", device, "Hi")
    assert_error_line(code, err, repr(device), reason, alone=True)


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


@pytest.mark.parametrize("source", ["--file", "stdin"])
def test_translate_input_that_is_not_utf8_names_file_and_line(monkeypatch, capsys, saved_model_dir, tmp_path, source):
    args, name = translate_input(monkeypatch, tmp_path, source, with_bad_line(NOT_UTF8))
    code, err = run_script(monkeypatch, capsys, "translate.py", "--model", saved_model_dir, "--num_beams", "1",
                           "--max_new_tokens", "2", "--batch_size", "1", *args)
    assert_error_line(code, err, f"{name}, line 3", "UTF-8")


def test_evaluate_input_that_is_not_utf8_names_file_and_line(monkeypatch, capsys, saved_model_dir, tmp_path):
    """--source_file and --reference_file are read alike (read_lines)."""
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_bytes(with_bad_line(b"fine"))
    bad.write_bytes(with_bad_line(NOT_UTF8))
    code, err = run_script(monkeypatch, capsys, "evaluate_model.py", "--model", saved_model_dir, "--output_dir",
                           tmp_path / "out", "--source_file", good, "--reference_file", bad)
    assert_error_line(code, err, f"{bad}, line 3", "UTF-8", alone=True)


LINE_BREAK_LOOKALIKES = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("source", ["--file", "stdin"])
def test_translate_keeps_one_output_line_per_input_line(monkeypatch, capsys, saved_model_dir, tmp_path, source):
    lines = [f"A dog{char}runs." for char in LINE_BREAK_LOOKALIKES] + ["A man.\r", "Two cats."]
    args, _ = translate_input(monkeypatch, tmp_path, source, ("\n".join(lines) + "\n").encode("utf-8"))
    assert run_script(monkeypatch, capsys, "translate.py", "--model", saved_model_dir, "--num_beams", "1",
                      "--max_new_tokens", "3", "--batch_size", "4", "--output", tmp_path / "out.de", *args)[0] == 0
    written = (tmp_path / "out.de").read_bytes().decode("utf-8")
    assert written.endswith("\n") and written.count("\n") == len(lines)


def test_translate_script_warns_about_cut_sentences(monkeypatch, capsys, caplog, saved_model_dir, tmp_path):
    logger = "modeling_vaswani.evaluation.translation"
    (tmp_path / "in.en").write_text("A dog.\n" + "dog " * 600 + "\n")
    with caplog.at_level("WARNING", logger=logger):
        assert run_script(monkeypatch, capsys, "translate.py", "--model", saved_model_dir, "--file", tmp_path / "in.en",
                          "--num_beams", "1", "--max_new_tokens", "2", "--batch_size", "1")[0] == 0
    warnings = [r.getMessage() for r in caplog.records if r.name == logger and "were cut" in r.getMessage()]
    assert len(warnings) == 1 and "1 of 2 sentences" in warnings[0] and "512 tokens" in warnings[0]


def run_process(*args, timeout=300):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, encoding="utf-8",
                          env={**CHILD_ENV, "PYTHONIOENCODING": "utf-8"}, timeout=timeout)


ODD_TEXT = ["Ein Hund 🐕 läuft über die Wiese.", "一只狗在雪地里奔跑。", "كلب يجري في الثلج",
            "Ζώο τρέχει — «εδώ» 🏃‍♀️🏽", "e\u0301 combining, zero\u200bwidth, ＦＵＬＬＷＩＤＴＨ", "🙂🙃🙂"]


@pytest.mark.slow
def test_mixed_scripts_and_emoji_through_translate_script(saved_model_dir):
    result = run_process(SCRIPTS / "translate.py", "--model", saved_model_dir, "--num_beams", "1",
                         "--max_new_tokens", "4", *ODD_TEXT)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert len(result.stdout.split("\n")) == len(ODD_TEXT) + 1  # one line per input, then the final newline


@pytest.mark.slow
def test_train_script_reports_undecodable_data_in_one_line(tmp_path):
    (tmp_path / "train.en").write_bytes(b"A dog.\nA cat.\n\x80\x81 broken\n")
    (tmp_path / "train.de").write_text("Ein Hund.\nEine Katze.\nkaputt\n")
    result = run_process(SCRIPTS / "train.py", "--train_source", tmp_path / "train.en", "--train_target",
                         tmp_path / "train.de", "--output_dir", tmp_path / "out", "--report_to", "none")
    assert_error_line(result.returncode, result.stderr, f"{tmp_path / 'train.en'}, line 3", "UTF-8", alone=True)
