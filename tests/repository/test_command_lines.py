"""The scripts' command lines misused: exit status 2 and one `error: ...` line naming what is at fault.
(Damaged model folders given to a script: tests/untrusted_folders/test_damaged_folders.py.)"""

import importlib.util
import io
import sys
from pathlib import Path

import pytest

from checks import SCRIPTS, assert_error_line, assert_names, run_script

REPO = SCRIPTS.parent


def test_no_script_shadows_an_installed_module():
    """`python scripts/x.py` puts scripts/ first on sys.path: a script named like a library (evaluate.py)
    would be imported in its place by every script there. Test folders (tests/benchmarks/table3) do not count."""
    assert sys.path[0] != str(SCRIPTS)
    specs = {p.name: importlib.util.find_spec(p.stem) for p in SCRIPTS.glob("*.py")}
    shadowing = [name for name, spec in specs.items() if spec is not None and not all(
        Path(place).is_relative_to(REPO / "tests") for place in spec.submodule_search_locations or [spec.origin or ""])]
    assert not shadowing, f"rename {shadowing}: each hides the installed module of the same name"


# A mistake and what its one line names; "{missing}" is a model folder that is not there. (The train.py flags'
# checks: test_train_flags.py; the other scripts': test_first_hour.py.)
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
