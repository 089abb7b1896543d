"""A hostile model folder is refused unread; our code never unpickles, runs only its own model code, stays offline."""

import ast
import json
import os
import socket
import tempfile
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSeq2SeqLM, pipeline

from checks import SCRIPTS, assert_error_line, assert_names, copy_folder, edit_json, hostile_pickle, run_script
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.evaluation.translation import load_translator
from modeling_vaswani.hub.repository import check_shipped_code
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.checkpoint_averaging import average_checkpoints

REPO = SCRIPTS.parent
W, INDEX = "model.safetensors", "model.safetensors.index.json"


@pytest.fixture
def no_unpickling(monkeypatch):
    calls = []

    def refused(*args, **kwargs):
        calls.append(args[:1])
        raise AssertionError("an unpickler was called")

    for target in ("torch.load", "pickle.load", "pickle.loads", "pickle.Unpickler"):
        monkeypatch.setattr(target, refused)
    return calls


# --- our code: no unpickling, no eval --------------------------------------------------------------

NOT_OUR_CODE = {"__pycache__", "build", "dist", "runs", "outputs", "tmp"}  # what .gitignore lists
UNPICKLERS = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "joblib", "marshal", "shelve"}
# The one permitted use: it records the Trainer's torch.load calls while resuming, passing them through.
ALLOWED = {("tests/repository/test_faults.py", "torch.load")}


def unsafe_uses(source: str) -> list[tuple[str, int]]:
    """(rule, line) of every forbidden import, call or argument, read from the syntax tree (not from text)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        rule = None
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in UNPICKLERS for a in node.names):
            rule = "pickle import"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            rule = "pickle import" if node.module.split(".")[0] in UNPICKLERS else "torch.load" if (
                node.module == "torch" and any(alias.name == "load" for alias in node.names)) else None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            rule = "torch.load" if (node.value.id, node.attr) == ("torch", "load") else "unpickler call" if (
                node.value.id in UNPICKLERS and node.attr in ("load", "loads", "Unpickler")) else None
        elif isinstance(node, ast.keyword) and isinstance(node.value, ast.Constant) and (
                node.arg, node.value.value) in (("weights_only", False), ("allow_pickle", True)):
            rule = f"{node.arg}={node.value.value}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
            rule = "eval/exec"
        found += [(rule, node.lineno)] if rule else []
    return found


def test_our_code_never_unpickles_or_executes():
    samples = {"torch.load": "state = torch.load(path)", "pickle import": "import pickle",
               "unpickler call": "state = pickle.loads(data)", "weights_only=False": "f(path, weights_only=False)",
               "allow_pickle=True": "np.load(path, allow_pickle=True)", "eval/exec": "exec(source)",
               "torch.load, pickle import": "from torch import load\nfrom dill import loads"}
    assert all({rule for rule, _ in unsafe_uses(sample)} == set(name.split(", ")) for name, sample in samples.items())
    assert unsafe_uses('model.eval()\njson.load(f)\nnp.load(path)\nf(weights_only=True)\n'
                       'message = "never torch.load(path)"\n# import pickle\n') == []  # the search sees only code
    files = [path for path in REPO.rglob("*.py") if not any(
        part.startswith(".") or part in NOT_OUR_CODE or part.endswith(".egg-info") for part in path.relative_to(
            REPO).parts[:-1])]
    assert {"modeling_vaswani", "scripts", "benchmarks", "examples", "tests", "hub_card"} <= {
        path.relative_to(REPO).parts[0] for path in files} and Path(__file__).resolve() in files
    assert not [f"{rel}:{line} {rule}" for path in files for rel in [path.relative_to(REPO).as_posix()]
                for rule, line in unsafe_uses(path.read_text(encoding="utf-8")) if (rel, rule) not in ALLOWED]


# --- a good folder, and folders that would unpickle ------------------------------------------------

def test_a_good_folder_loads_and_translates_through_every_door_without_unpickling_or_network(
        saved_model_dir, folder, tmp_path, no_unpickling, no_network):
    models = [VaswaniForConditionalGeneration.from_pretrained(saved_model_dir),
              AutoModelForSeq2SeqLM.from_pretrained(saved_model_dir, trust_remote_code=True)]
    inputs = load_tokenizer(saved_model_dir)(["A dog runs in the snow."], return_tensors="pt")
    outputs = [model.generate(**inputs, max_new_tokens=3).tolist() for model in models]
    assert outputs[0] == outputs[1]
    translated = pipeline("translation", model=str(saved_model_dir), trust_remote_code=True)("A dog.", max_new_tokens=3)
    assert isinstance(translated[0]["translation_text"], str)
    average_checkpoints([saved_model_dir, folder], tmp_path / "averaged")
    model, tokenizer = load_translator(str(saved_model_dir), device="cpu")
    assert model.generate(**tokenizer(["A dog."], return_tensors="pt"), num_beams=1, max_new_tokens=2).shape[0] == 1
    check_shipped_code(saved_model_dir)  # every .py is the package's byte for byte; config.json names only them
    assert no_unpickling == [] and no_network == []
    with pytest.raises(OSError):  # control: the guard itself works
        socket.create_connection(("huggingface.co", 443))
    assert no_network == [(("huggingface.co", 443),)]
    names = {p.relative_to(saved_model_dir).as_posix() for p in saved_model_dir.rglob("*") if p.is_file()}
    # JSON, Python source and safetensors: nothing that unpickles. (Which .py: tests/model/test_remote_code.py.)
    assert W in names and all(name.endswith((".json", ".py", ".safetensors")) for name in names), names


def test_a_folder_with_only_pickled_weights_is_refused_unopened(folder, refused, tmp_path, no_unpickling):
    (folder / W).unlink()
    (folder / "pytorch_model.bin").write_bytes(hostile_pickle(tmp_path / "payload-ran"))
    for door in ("from_pretrained", "load_translator"):
        refused(ValueError, door, folder, "only pickled weights")
    with pytest.raises(ValueError) as error:
        VaswaniForConditionalGeneration.from_pretrained(folder, use_safetensors=False)
    assert_names(error, "use_safetensors=False")
    assert no_unpickling == [] and not (tmp_path / "payload-ran").exists()


# evaluate_model.py checks --model as translate.py does; AutoModel: AutoConfig reads the file first (as JSON)
@pytest.mark.parametrize("door", ["from_pretrained", "load_translator", "load_tokenizer", "AutoModel", "translate.py"])
@pytest.mark.parametrize("file", [W, "pickle"])  # any file: refused before it is read
def test_a_file_given_as_model_is_refused_unread(saved_model_dir, doors, tmp_path, monkeypatch, capsys,
                                                 no_unpickling, file, door):
    path = saved_model_dir / file
    if file == "pickle":
        path = tmp_path / "weights.bin"
        path.write_bytes(hostile_pickle(tmp_path / "payload-ran"))
    if door == "translate.py":
        assert_error_line(*run_script(monkeypatch, capsys, door, "--model", path, "A dog."), path, "is a file, not a")
    else:
        with pytest.raises((OSError, ValueError) if door == "AutoModel" else NotADirectoryError) as error:
            doors[door](str(path))
        assert_names(error, path, *([] if door == "AutoModel" else ["is a file"]))
    assert no_unpickling == [] and not (tmp_path / "payload-ran").exists()


# --- code the folder points at or ships ------------------------------------------------------------

def _config_entry(field, key, value):
    def change(folder):
        entries = json.loads((folder / "config.json").read_text())[field]
        entries[key] = {**entries[key], "impl": value} if field == "custom_pipelines" else value
        edit_json(folder / "config.json", **{field: entries})
    return change


def _planted(path, text):
    def plant(folder):
        (folder / path).parent.mkdir(exist_ok=True)
        (folder / path).write_text((folder / path).read_text() + text if text.startswith("\n") else text)
    return plant


FOREIGN_AUTO_MAP = "other/repo--modeling.Evil"
CODE_TAMPERING = {
    "auto_map-other-repository": (_config_entry("auto_map", "AutoModelForCausalLM", FOREIGN_AUTO_MAP),
                                  ["auto_map", "another repository", FOREIGN_AUTO_MAP]),
    "auto_map-entry-replaced": (_config_entry("auto_map", "AutoModelForSeq2SeqLM", "other/repo--modeling_vaswani.X"),
                                ["another repository", "other/repo--modeling_vaswani.X"]),
    "auto_map-unshipped-module": (_config_entry("auto_map", "AutoConfig", "evil.EvilConfig"), ["evil.py"]),
    "custom_pipelines-other-repository": (_config_entry("custom_pipelines", "translation", "other/repo--pipeline.Evil"),
                                          ["custom_pipelines['translation'].impl"]),
    "tokenizer_config-auto_map": (lambda f: edit_json(f / "tokenizer_config.json", auto_map={
        "AutoTokenizer": ["other/repo--tok.Evil", None]}), ["tokenizer_config.json", "auto_map"]),
    "planted-module": (_planted("json.py", "raise SystemExit('planted')\n"), ["json.py"]),
    "module-in-a-subfolder": (_planted("extra/helpers.py", "x = 1\n"), ["extra/helpers.py"]),
    "changed-module": (_planted("modeling_vaswani.py", "\nimport os  # changed\n"), ["modeling_vaswani.py", "differs"]),
    "changed-custom_generate": (_planted("custom_generate/generate.py", "def generate(model, *a, **k):\n    pass\n"),
                                ["custom_generate/generate.py", "differs"]),
}


@pytest.mark.parametrize("tampering", list(CODE_TAMPERING))
def test_code_the_folder_points_at_must_be_the_package_model_code(folder, tampering):
    change, names = CODE_TAMPERING[tampering]
    change(folder)
    with pytest.raises(ValueError) as error:
        check_shipped_code(folder)
    assert_names(error, *names)  # validate_repository (push_to_hub.py --dry_run) calls check_shipped_code: below


def test_push_dry_run_refuses_a_model_whose_config_points_at_another_repository(tmp_path, monkeypatch, capsys):
    model_dir = copy_folder(REPO / "hub_card", tmp_path, "model")
    CODE_TAMPERING["auto_map-other-repository"][0](model_dir)
    code, err = run_script(monkeypatch, capsys, "push_to_hub.py", "--model_dir", model_dir, "--repo_id", "user/name",
                           "--dry_run", "--output_dir", tmp_path / "repo")
    assert_error_line(code, err, "another repository", FOREIGN_AUTO_MAP)


def test_our_loader_never_runs_code_shipped_in_a_folder(folder, tmp_path):
    marker, code = tmp_path / "foreign-code-ran", folder / "configuration_vaswani.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\n" + code.read_text())
    edit_json(folder / "config.json", model_type="not_vaswani")  # would run under trust_remote_code
    with pytest.raises(ValueError) as error:  # transformers' message, of several lines
        load_translator(str(folder), device="cpu")
    assert_names(error, "trust_remote_code")
    assert not marker.exists()


@pytest.mark.slow
def test_hub_check_imports_no_module_planted_where_it_runs(tmp_path, monkeypatch, capsys, load_module):
    """The clean-process check used to run in the system temporary folder, importing a json.py planted there."""
    planted, marker = tmp_path / "shared-tmp", tmp_path / "planted-module-ran"
    planted.mkdir()
    for name in ("json", "transformers", "safetensors"):
        (planted / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.setenv("TMPDIR", str(planted))
    monkeypatch.setattr(tempfile, "tempdir", str(planted))
    monkeypatch.chdir(planted)  # the current folder of the caller is no safer
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_module(SCRIPTS / "push_to_hub.py").main(["--model_dir", str(REPO / "hub_card"), "--repo_id", "u/n",
                                                   "--dry_run"])
    assert "complete and valid" in capsys.readouterr().out
    assert not marker.exists(), f"planted module ran: {marker.read_text()}"


# --- weights the folder points at: an index's shards ----------------------------------------------

def _sharded(folder, shard="weights.safetensors"):
    """Weights moved to weights.safetensors; an index mapping each tensor to `shard`, or (not a str) whose map it is."""
    tensors = load_file(str(folder / W))
    save_file(tensors, str(folder / "weights.safetensors"), metadata={"format": "pt"})
    (folder / W).unlink()
    weight_map = {name: shard for name in tensors} if isinstance(shard, str) else shard
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


# A shard outside the folder or pickled; or no map of tensor names to shard names at all.
BAD_WEIGHT_MAPS = ["../model.safetensors", "sub/../../model.safetensors", "/tmp/model.safetensors", "pytorch_model.bin",
                   "weights.pt", "weights", [], {"a": 3}, None]


@pytest.mark.parametrize("weight_map", BAD_WEIGHT_MAPS, ids=repr)
@pytest.mark.parametrize("door", ["from_pretrained", "load_translator", "Hub cache copy", "Hub index first"])
def test_an_index_naming_a_shard_outside_the_folder_or_pickled_or_none_is_refused(folder, refused, tmp_path, door,
                                                                                   weight_map):
    marker = tmp_path / "payload-ran"
    (_sharded(folder, weight_map) / "pytorch_model.bin").write_bytes(hostile_pickle(marker))
    shard = [".safetensors files", repr(weight_map)] if isinstance(weight_map, str) else []
    refused(ValueError, door, folder, folder / INDEX, "weight_map", *shard)
    assert not marker.exists()


def test_a_sharded_folder_inside_the_rules_loads_and_a_shard_that_is_a_symlink_out_of_it_is_refused(
        folder, doors, refused, tmp_path):
    _sharded(folder)
    for door in ("from_pretrained", "load_translator"):
        doors[door](folder)
    outside = tmp_path / "outside.safetensors"
    (folder / "weights.safetensors").rename(outside)
    os.symlink(outside, folder / "weights.safetensors")
    refused(ValueError, "from_pretrained", folder, "'weights.safetensors'")
    doors["Hub cache copy"](folder)  # the Hub cache's files are symlinks into its blobs folder
