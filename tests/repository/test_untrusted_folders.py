"""Untrusted folders and files: a model folder, its configs and its tokenizer are input from a
stranger. None of them may run code, exhaust memory or hang; each is refused with one clear line.

Classes of hostile or broken input, each a table:
- code the folder points at (auto_map, custom_pipelines, custom_generate) that is not exactly the
  package's model code, or a module planted where the Hub check runs;
- a path to a file where a model folder belongs (loaders would hand it to a weights loader);
- sizes in config.json that would allocate without bound;
- a tokenizer.json whose pattern makes the tokenizers library panic (a BaseException).
"""

import json
import re
import runpy
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.cli import run_main
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.hub.repository import check_shipped_code, validate_repository
from modeling_vaswani.model.configuration_vaswani import ALLOW_LARGE_MODELS_ENV
from modeling_vaswani.tokenizer_loading import load_tokenizer

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def copy_of(folder, tmp_path, name="copy") -> Path:
    return Path(shutil.copytree(folder, tmp_path / name))


def edit_json(path: Path, **changes) -> None:
    values = json.loads(path.read_text(encoding="utf-8"))
    values.update(changes)
    path.write_text(json.dumps(values), encoding="utf-8")


def run_script(monkeypatch, capsys, script, *args):
    """`python scripts/<script> args`, in this process: (exit status, stderr)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / script), *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(SCRIPTS / script), run_name="__main__")
    return stop.value.code, capsys.readouterr().err


def assert_one_line_error(code, err, *words):
    """Exit status 2 and, as the last line, one `error: ...` naming `words` (and no traceback)."""
    assert code == 2, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: "), err
    for word in words:
        assert str(word) in last, (word, last)


# --- code the folder points at ------------------------------------------------------------------

def _foreign_auto_map(folder):
    config = json.loads((folder / "config.json").read_text())
    edit_json(folder / "config.json", auto_map={**config["auto_map"],
                                                "AutoModelForCausalLM": "other/repo--modeling.Evil"})


def _foreign_existing_entry(folder):
    config = json.loads((folder / "config.json").read_text())
    edit_json(folder / "config.json", auto_map={**config["auto_map"],
                                                "AutoModelForSeq2SeqLM": "other/repo--modeling_vaswani.X"})


def _unshipped_module(folder):
    config = json.loads((folder / "config.json").read_text())
    edit_json(folder / "config.json", auto_map={**config["auto_map"], "AutoConfig": "evil.EvilConfig"})


def _foreign_pipeline(folder):
    config = json.loads((folder / "config.json").read_text())
    pipelines = config["custom_pipelines"]
    pipelines["translation"]["impl"] = "other/repo--pipeline.Evil"
    edit_json(folder / "config.json", custom_pipelines=pipelines)


def _foreign_tokenizer_code(folder):
    edit_json(folder / "tokenizer_config.json", auto_map={"AutoTokenizer": ["other/repo--tok.Evil", None]})


def _planted_module(folder):
    (folder / "json.py").write_text("raise SystemExit('planted')\n")


def _planted_in_subfolder(folder):
    (folder / "extra").mkdir()
    (folder / "extra" / "helpers.py").write_text("x = 1\n")


def _changed_module(folder):
    path = folder / "modeling_vaswani.py"
    path.write_text(path.read_text() + "\nimport os  # changed\n")


def _changed_custom_generate(folder):
    (folder / "custom_generate").mkdir(exist_ok=True)
    (folder / "custom_generate" / "generate.py").write_text("def generate(model, *args, **kwargs):\n    pass\n")


CODE_TAMPERING = {
    "auto_map-other-repository": (_foreign_auto_map, "points at code in another repository"),
    "auto_map-entry-replaced": (_foreign_existing_entry, "points at code in another repository"),
    "auto_map-unshipped-module": (_unshipped_module, "evil.py, which the repository does not ship"),
    "custom_pipelines-other-repository": (_foreign_pipeline, "custom_pipelines['translation'].impl points at code in"),
    "tokenizer_config-auto_map": (_foreign_tokenizer_code, "tokenizer_config.json auto_map"),
    "planted-module": (_planted_module, "ships json.py, which is not part of the model code"),
    "module-in-a-subfolder": (_planted_in_subfolder, "ships extra/helpers.py"),
    "changed-module": (_changed_module, "modeling_vaswani.py differs from the package's model/modeling_vaswani.py"),
    "changed-custom_generate": (_changed_custom_generate, "custom_generate/generate.py differs"),
}


def test_shipped_code_control(saved_model_dir):
    """Control for the table below: a folder as save_pretrained writes it passes."""
    check_shipped_code(saved_model_dir)


@pytest.mark.parametrize("tampering", list(CODE_TAMPERING))
def test_code_the_folder_points_at_must_be_the_package_model_code(saved_model_dir, tmp_path, tampering):
    folder = copy_of(saved_model_dir, tmp_path)
    change, message = CODE_TAMPERING[tampering]
    change(folder)
    with pytest.raises(ValueError, match=re.escape(message)):
        check_shipped_code(folder)
    # validate_repository (what push_to_hub.py --dry_run reports on) refuses before any code runs.
    for name in ("README.md", "results.json"):
        (folder / name).write_text("{}")
    with pytest.raises(ValueError, match="code|ships|differs"):
        validate_repository(folder)


def test_push_dry_run_refuses_a_model_whose_config_points_at_another_repository(tmp_path, monkeypatch, capsys):
    """A model folder with a foreign auto_map entry: save_pretrained keeps the entry in the written
    repository, which --dry_run used to report as "complete and valid"."""
    model_dir = copy_of(REPO / "hub_card", tmp_path, "model")
    _foreign_auto_map(model_dir)
    code, err = run_script(monkeypatch, capsys, "push_to_hub.py", "--model_dir", model_dir, "--repo_id", "user/name",
                           "--dry_run", "--output_dir", tmp_path / "repo")
    assert_one_line_error(code, err, "points at code in another repository", "other/repo--modeling.Evil")


@pytest.mark.slow
def test_hub_check_imports_no_module_planted_where_it_runs(tmp_path, monkeypatch, capsys, load_module):
    """The clean-process check used to run with the system temporary folder as its current folder,
    so a json.py planted there was imported (and run) in place of the standard library's."""
    planted = tmp_path / "shared-tmp"
    planted.mkdir()
    marker = tmp_path / "planted-module-ran"
    for name in ("json", "transformers", "safetensors"):
        (planted / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.setenv("TMPDIR", str(planted))
    monkeypatch.setattr(tempfile, "tempdir", str(planted))
    monkeypatch.chdir(planted)  # the current folder of the caller is no safer
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_module(SCRIPTS / "push_to_hub.py").main(["--model_dir", str(REPO / "hub_card"), "--repo_id", "user/name",
                                                   "--dry_run"])
    assert "complete and valid" in capsys.readouterr().out
    assert not marker.exists(), f"planted module ran: {marker.read_text()}"


# --- a file where a model folder belongs ---------------------------------------------------------

def hostile_pickle(marker: Path) -> bytes:
    """A pickle (protocol 0, written out by hand) that creates `marker` when unpickled: the stand-in
    for arbitrary code."""
    return f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode()


def _pickle_file(folder, tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(hostile_pickle(tmp_path / "payload-ran"))
    return path


MODEL_FILES = {
    "config.json": lambda folder, tmp_path: folder / "config.json",
    "model.safetensors": lambda folder, tmp_path: folder / "model.safetensors",
    "tokenizer.json": lambda folder, tmp_path: folder / "tokenizer.json",
    "pickle": _pickle_file,
}
LOADERS = {
    "from_pretrained": VaswaniForConditionalGeneration.from_pretrained,
    "load_translator": lambda path: load_translator(path, device="cpu"),
    "load_tokenizer": load_tokenizer,
    # transformers' AutoConfig reads the file first (as JSON, refusing a binary one); ours refuses the rest.
    "AutoModel": lambda path: AutoModelForSeq2SeqLM.from_pretrained(path),
}


@pytest.fixture
def no_unpickling(monkeypatch):
    calls = []

    def refused(*args, **kwargs):
        calls.append(args[:1])
        raise AssertionError("an unpickler was called")

    for target in ("torch.load", "pickle.load", "pickle.loads", "pickle.Unpickler"):
        monkeypatch.setattr(target, refused)
    return calls


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize("file", list(MODEL_FILES))
def test_a_file_given_as_model_is_refused_unread(saved_model_dir, tmp_path, no_unpickling, file, loader):
    path = MODEL_FILES[file](saved_model_dir, tmp_path)
    expected = (OSError, ValueError) if loader == "AutoModel" else NotADirectoryError
    with pytest.raises(expected) as error:
        LOADERS[loader](str(path))
    assert str(path) in str(error.value)
    if loader != "AutoModel":
        assert "is a file, not a" in str(error.value)
    assert no_unpickling == [] and not (tmp_path / "payload-ran").exists()


@pytest.mark.parametrize("file", list(MODEL_FILES))
@pytest.mark.parametrize("script,flag,extra", [("translate.py", "--model", ["Hello"]),
                                               ("evaluate_model.py", "--model", ["--max_samples", "2"])])
def test_scripts_refuse_a_file_given_as_model(saved_model_dir, tmp_path, monkeypatch, capsys, file, script, flag,
                                              extra):
    path = MODEL_FILES[file](saved_model_dir, tmp_path)
    code, err = run_script(monkeypatch, capsys, script, flag, path, *extra)
    assert_one_line_error(code, err, path, "is a file, not a model folder")
    assert not (tmp_path / "payload-ran").exists()


# --- sizes that would allocate without bound -----------------------------------------------------

HUGE_CONFIGS = {
    "num_layers": ({"num_layers": 100_000}, "num_layers=100000"),
    "num_decoder_layers": ({"num_decoder_layers": 5_000}, "num_decoder_layers=5000"),
    "max_position_embeddings": ({"max_position_embeddings": 10**9}, "max_position_embeddings=1000000000"),
    "d_model": ({"d_model": 10**7, "d_k": None, "d_v": None}, "d_model=10000000"),
    "d_ff": ({"d_ff": 10**9}, "d_ff=1000000000"),
    "vocab_size": ({"vocab_size": 10**10}, "vocab_size=10000000000"),
    "heads": ({"num_heads": 100_000, "d_k": 10_000, "d_v": 10_000}, "num_heads=100000"),
}


def _huge_folder(saved_model_dir, tmp_path, case):
    folder = copy_of(saved_model_dir, tmp_path)
    values = json.loads((folder / "config.json").read_text())
    values.update(HUGE_CONFIGS[case][0])
    (folder / "config.json").write_text(json.dumps({k: v for k, v in values.items() if v is not None}))
    return folder


@pytest.mark.parametrize("loader", ["config", "model", "AutoModel"])
@pytest.mark.parametrize("case", list(HUGE_CONFIGS))
def test_sizes_beyond_the_bounds_are_refused_before_allocating(saved_model_dir, tmp_path, monkeypatch, case, loader):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    folder = _huge_folder(saved_model_dir, tmp_path, case)
    load = {"config": VaswaniConfig.from_pretrained, "model": VaswaniForConditionalGeneration.from_pretrained,
            "AutoModel": AutoModelForSeq2SeqLM.from_pretrained}[loader]
    with pytest.raises(ValueError, match=HUGE_CONFIGS[case][1]) as error:
        load(folder)
    assert f"{ALLOW_LARGE_MODELS_ENV}=1" in str(error.value)  # the message says how to mean it
    if loader != "AutoModel":  # transformers' AutoConfig builds the config without the path (load_translator adds it)
        assert str(folder) in str(error.value)


def test_load_translator_names_the_config_with_the_huge_size(saved_model_dir, tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    folder = _huge_folder(saved_model_dir, tmp_path, "max_position_embeddings")
    with pytest.raises(ValueError, match=re.escape(f"{str(folder)!r} (config.json): VaswaniConfig.max_position")):
        load_translator(str(folder), device="cpu")


@pytest.mark.parametrize("case", ["max_position_embeddings", "num_decoder_layers", "vocab_size"])
def test_the_bounds_can_be_lifted_on_purpose(saved_model_dir, tmp_path, monkeypatch, case):
    folder = _huge_folder(saved_model_dir, tmp_path, case)
    monkeypatch.setenv(ALLOW_LARGE_MODELS_ENV, "1")
    config = VaswaniConfig.from_pretrained(folder)  # the config only: nothing is allocated here
    key, value = next(iter(HUGE_CONFIGS[case][0].items()))
    assert getattr(config, key) == value


def test_a_config_json_cannot_lift_the_bounds_itself(saved_model_dir, tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    folder = _huge_folder(saved_model_dir, tmp_path, "num_layers")
    edit_json(folder / "config.json", **{ALLOW_LARGE_MODELS_ENV: 1, "allow_large_models": True})
    with pytest.raises(ValueError, match="num_layers=100000"):
        VaswaniConfig.from_pretrained(folder)


def test_the_paper_sizes_are_within_the_bounds(monkeypatch):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    for preset in ("base", "big"):
        VaswaniConfig.from_preset(preset, vocab_size=37000)
    VaswaniConfig.from_preset("big", vocab_size=250_000, max_position_embeddings=65_536)


# --- a tokenizer that panics -----------------------------------------------------------------------

# Nested quantifiers: the regex engine backtracks exponentially on a run of "a" that does not end
# the text, and the tokenizers library panics (pyo3 PanicException, a BaseException) instead of
# raising.
BACKTRACKING = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
PANIC_LINE = "a" * 40 + "b"  # 41 characters


@pytest.fixture
def panicking_folder(saved_model_dir, tmp_path):
    folder = copy_of(saved_model_dir, tmp_path)
    edit_json(folder / "tokenizer.json", pre_tokenizer=BACKTRACKING)
    return folder


def test_a_tokenizer_panic_becomes_a_value_error(panicking_folder):
    model, tokenizer = load_translator(str(panicking_folder), device="cpu")
    with pytest.raises(ValueError, match="The tokenizer failed on 2 sentences") as error:
        translate(model, tokenizer, ["fine", PANIC_LINE], num_beams=1, max_new_tokens=2)
    assert "retry-limit" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("source", ["argument", "file", "stdin"])
def test_translate_script_reports_a_tokenizer_panic_in_one_line(panicking_folder, tmp_path, monkeypatch, capsys,
                                                                source):
    import io

    args = ["--model", panicking_folder, "--num_beams", "1", "--max_new_tokens", "2"]
    if source == "argument":
        args.append(PANIC_LINE)
    elif source == "file":
        (tmp_path / "in.txt").write_text(f"fine\n{PANIC_LINE}\n")
        args += ["--file", tmp_path / "in.txt", "--output", tmp_path / "out.txt"]
    else:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{PANIC_LINE}\n".encode())))
    code, err = run_script(monkeypatch, capsys, "translate.py", *args)
    assert_one_line_error(code, err, "The tokenizer failed", "tokenizer.json")


def test_run_main_turns_any_tokenizer_panic_into_one_line(capsys):
    """A panic anywhere under a script's main (training tokenizes its data too) ends in one line."""
    PanicException = type("PanicException", (BaseException,), {})  # what pyo3 raises, by name

    def main():
        raise PanicException("Onig: Regex search error: retry-limit-in-match over")

    with pytest.raises(SystemExit) as stop:
        run_main(main)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: the tokenizer failed (Onig: Regex search error")


def test_other_base_exceptions_still_propagate():
    class Unexpected(BaseException):
        pass

    def main():
        raise Unexpected

    with pytest.raises(Unexpected):
        run_main(main)


def test_a_folder_with_a_panicking_tokenizer_still_tokenizes_other_text(panicking_folder):
    """Control: the tokenizer loads and works; only the text it cannot handle is refused."""
    tokenizer = load_tokenizer(panicking_folder)
    assert tokenizer(["A dog."], return_tensors="pt")["input_ids"].shape[0] == 1
    assert isinstance(torch.tensor(tokenizer("bbb")["input_ids"]), torch.Tensor)
