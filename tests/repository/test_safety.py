"""Loading a model never unpickles, never runs foreign code and never touches the network.

- Weights are written and read as safetensors only: our code has no `torch.load` or `pickle`,
  `save_pretrained` writes no pickle, loading a folder calls no unpickler, and a folder holding
  only a pickled `pytorch_model.bin` is refused without opening it.
- The code `save_pretrained` copies into a folder (for `trust_remote_code`) is exactly the
  package's model code, and our loaders never run code shipped inside a folder.
- With HF_HUB_OFFLINE=1, importing the package, loading a folder (with `trust_remote_code` too),
  loading the BLEU metric and generating make no network connection.
"""

import ast
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import modeling_vaswani
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.training.checkpoint_averaging import average_checkpoints
from modeling_vaswani.training.data import DEFAULT_DATA_DIR, read_lines
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.tokenization import train_bpe_tokenizer
from modeling_vaswani.evaluation.translation import load_translator

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(modeling_vaswani.__file__).resolve().parent
MODEL_CODE = PACKAGE / "model"  # exactly what save_pretrained copies


@pytest.fixture(scope="module")
def tokenizer():
    english = read_lines(DEFAULT_DATA_DIR / "train.en.gz")[:200]
    german = read_lines(DEFAULT_DATA_DIR / "train.de.gz")[:200]
    return train_bpe_tokenizer(english + german, vocab_size=200)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    torch.manual_seed(0)
    config = VaswaniConfig.from_preset("tiny", vocab_size=len(tokenizer), d_model=16, d_ff=32, num_heads=2,
                                       num_layers=1)
    folder = tmp_path_factory.mktemp("safety") / "model"
    VaswaniForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# --- no pickles --------------------------------------------------------------------------------

# What .gitignore lists (environments, caches, build and run outputs) is generated, not our code.
NOT_OUR_CODE = {"__pycache__", "build", "dist", "runs", "outputs", "tmp"}


def _python_files(root: Path) -> list[Path]:
    """Every Python file of the repository: package, scripts, benchmarks, examples, tests, hub_card."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders if not name.startswith(".") and name not in NOT_OUR_CODE
                         and not name.endswith(".egg-info")]
        found.extend(Path(folder) / name for name in files if name.endswith(".py"))
    return sorted(found)


OUR_CODE = _python_files(REPO)
UNPICKLING_MODULES = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "joblib", "marshal", "shelve"}
RULES = ("torch.load", "pickle import", "unpickler call", "weights_only=False", "allow_pickle=True", "eval/exec")
# The one permitted use, and why: this file writes a hostile pickle (to prove it is refused
# unopened) and replaces every unpickler by a failing one; it never unpickles.
ALLOWED = {
    ("tests/repository/test_safety.py", "pickle import"),
    # Records the Trainer's own torch.load calls while it resumes a genuine checkpoint (passing them
    # through) to show that every one is weights_only=True; it loads nothing itself.
    ("tests/repository/test_faults.py", "torch.load"),
}


def unsafe_uses(source: str) -> list[tuple[str, int]]:
    """(rule, line) of every forbidden import, call or argument, read from the syntax tree.

    Code, not text: a string or comment that names them (like this file's samples) does not count.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [("pickle import", node.lineno) for alias in node.names
                      if alias.name.split(".")[0] in UNPICKLING_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in UNPICKLING_MODULES:
                found.append(("pickle import", node.lineno))
            if node.module == "torch" and any(alias.name == "load" for alias in node.names):
                found.append(("torch.load", node.lineno))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) == ("torch", "load"):
                found.append(("torch.load", node.lineno))
            elif node.value.id in UNPICKLING_MODULES and node.attr in ("load", "loads", "Unpickler"):
                found.append(("unpickler call", node.lineno))
        elif isinstance(node, ast.keyword) and isinstance(node.value, ast.Constant):
            if node.arg == "weights_only" and node.value.value is False:
                found.append(("weights_only=False", node.lineno))
            elif node.arg == "allow_pickle" and node.value.value is True:
                found.append(("allow_pickle=True", node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
            found.append(("eval/exec", node.lineno))
    return found


def test_the_unsafe_use_search_finds_what_it_looks_for():
    """Control: each rule catches the usage it forbids (so the next test could fail), and only code counts."""
    samples = {
        "torch.load": "state = torch.load(path)",
        "pickle import": "import pickle",
        "unpickler call": "state = pickle.loads(data)",
        "weights_only=False": "x = f(path, weights_only=False)",
        "allow_pickle=True": "np.load(path, allow_pickle=True)",
        "eval/exec": "exec(source)",
    }
    assert set(samples) == set(RULES)
    for name, sample in samples.items():
        assert name in {rule for rule, _ in unsafe_uses(sample)}, name
    assert {rule for rule, _ in unsafe_uses("from torch import load\nfrom dill import loads")} == {
        "torch.load", "pickle import"}
    harmless = ('model.eval()\njson.load(f)\nnp.load(path)\nf(weights_only=True)\n'
                'message = "refuses pickled weights, never torch.load(path)"\n# import pickle\n')
    assert unsafe_uses(harmless) == []


@pytest.mark.parametrize("name", RULES)
def test_our_code_never_unpickles_or_executes(name):
    parts = {path.relative_to(REPO).parts[0] for path in OUR_CODE}
    assert {"modeling_vaswani", "scripts", "benchmarks", "examples", "tests", "hub_card"} <= parts
    assert Path(__file__).resolve() in OUR_CODE and not any(".venv" in path.parts for path in OUR_CODE)
    offenders = [
        f"{relative}:{line}"
        for path in OUR_CODE
        for relative in [path.relative_to(REPO).as_posix()]
        for rule, line in unsafe_uses(path.read_text(encoding="utf-8"))
        if rule == name and (relative, rule) not in ALLOWED
    ]
    assert not offenders, f"{name} in {offenders}"


def test_save_pretrained_writes_safetensors_and_no_pickle(model_dir):
    names = {path.relative_to(model_dir).as_posix() for path in model_dir.rglob("*") if path.is_file()}
    assert "model.safetensors" in names
    # JSON, the tokenizer's JSON and Python source are all there is: nothing that unpickles.
    assert all(name.endswith((".json", ".py", ".safetensors")) for name in names), names
    assert not {name for name in names if name.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle"))}


@pytest.fixture
def no_unpickling(monkeypatch):
    """Make every unpickler fail loudly for the duration of a test."""
    calls = []

    def refuse(name):
        def refused(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} was called while loading")
        return refused

    monkeypatch.setattr(torch, "load", refuse("torch.load"))
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse(f"pickle.{name}"))
    return calls


def test_loading_a_folder_calls_no_unpickler(model_dir, tmp_path, no_unpickling):
    model, tokenizer = load_translator(str(model_dir), device="cpu")
    VaswaniForConditionalGeneration.from_pretrained(model_dir)
    load_tokenizer(model_dir)
    average_checkpoints([model_dir, shutil.copytree(model_dir, tmp_path / "copy")], tmp_path / "averaged")
    assert model.generate(**tokenizer(["A dog."], return_tensors="pt"), num_beams=1, max_new_tokens=2).shape[0] == 1
    assert no_unpickling == []


class _Payload:
    """Unpickling this creates a file: the stand-in for arbitrary code in a hostile pickle."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_a_folder_with_only_pickled_weights_is_refused_unopened(model_dir, tmp_path):
    folder = Path(shutil.copytree(model_dir, tmp_path / "pickled"))
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "payload-ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ValueError, match="only pickled weights") as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert str(folder) in str(error.value)
    with pytest.raises(ValueError, match="only pickled weights"):
        load_translator(str(folder), device="cpu")
    with pytest.raises(ValueError, match="use_safetensors=False is not supported"):
        VaswaniForConditionalGeneration.from_pretrained(folder, use_safetensors=False)
    assert not marker.exists()


# --- no foreign code ---------------------------------------------------------------------------


def _relative_imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return {f"{node.module}.py" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_copied_code_is_exactly_the_model_modules(model_dir):
    # What save_pretrained should copy: the config and model modules and all they import from the
    # package, transitively (design note: "Why the package is flat").
    expected, todo = set(), ["modeling_vaswani.py", "configuration_vaswani.py"]
    while todo:
        name = todo.pop()
        if name not in expected:
            expected.add(name)
            todo.extend(_relative_imports(MODEL_CODE / name))
    copied = {path.name for path in model_dir.glob("*.py")}
    assert copied == expected
    for name in copied:
        assert (model_dir / name).read_bytes() == (MODEL_CODE / name).read_bytes(), name
    # custom_generate/generate.py, the only code outside the flat modules, is the package's byte for byte.
    nested = {path.relative_to(model_dir).as_posix() for path in model_dir.rglob("*.py")} - copied
    assert nested == {"custom_generate/generate.py"}
    assert (model_dir / "custom_generate" / "generate.py").read_bytes() == (
        MODEL_CODE / "custom_generate" / "generate.py").read_bytes()
    config = json.loads((model_dir / "config.json").read_text())
    referenced = {ref.split(".")[0] + ".py" for ref in config["auto_map"].values()}
    referenced |= {spec["impl"].split(".")[0] + ".py" for spec in config["custom_pipelines"].values()}
    assert referenced <= copied


def test_our_loader_never_runs_code_shipped_in_a_folder(model_dir, tmp_path):
    """A folder of another model type whose code would run under trust_remote_code is refused."""
    folder = Path(shutil.copytree(model_dir, tmp_path / "foreign"))
    marker = tmp_path / "foreign-code-ran"
    code = folder / "configuration_vaswani.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\n" + code.read_text())
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "not_vaswani"}))
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_translator(str(folder), device="cpu")
    assert not marker.exists()


# --- no network --------------------------------------------------------------------------------

# Every way to open a connection or resolve a name records the attempt and fails.
_OFFLINE_CHILD = """
import json, socket, sys
attempts = []

def refuse(name):
    def refused(*args, **kwargs):
        attempts.append(f"{name}{args[1:2] if name.startswith('socket.') else args[:1]}")
        raise OSError(f"network access attempted: {name}")
    return refused

socket.socket.connect = refuse("socket.connect")
socket.socket.connect_ex = refuse("socket.connect_ex")
socket.create_connection = refuse("create_connection")
socket.getaddrinfo = refuse("getaddrinfo")

import modeling_vaswani
from transformers import AutoModelForSeq2SeqLM, pipeline
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.evaluation.scoring import load_bleu_metric
from modeling_vaswani.tokenizer_loading import load_tokenizer

folder = sys.argv[1]
model = VaswaniForConditionalGeneration.from_pretrained(folder)
remote = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
tokenizer = load_tokenizer(folder)
inputs = tokenizer(["A dog runs in the snow."], return_tensors="pt")
outputs = [m.generate(**inputs, max_new_tokens=3).tolist() for m in (model, remote)]
translated = pipeline("translation", model=folder, trust_remote_code=True)("A dog.", max_new_tokens=3)
sentence = "a dog runs in the snow"
bleu = load_bleu_metric().compute(predictions=[sentence], references=[[sentence]])["bleu"]
try:
    socket.create_connection(("huggingface.co", 443))  # control: the guard itself works
except OSError:
    pass
print(json.dumps(dict(attempts=attempts, outputs=outputs, bleu=bleu, translated=translated)))
"""


@pytest.mark.slow
def test_no_network_access_offline(model_dir, tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"), OMP_NUM_THREADS="1",
               PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", _OFFLINE_CHILD, str(model_dir)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # Only the control attempt at the very end was made.
    assert report["attempts"] == ["create_connection(('huggingface.co', 443),)"], report["attempts"]
    assert report["outputs"][0] == report["outputs"][1]
    assert report["bleu"] == pytest.approx(100.0)
    assert isinstance(report["translated"][0]["translation_text"], str)
