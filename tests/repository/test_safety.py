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
import re
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
from modeling_vaswani.training.tokenization import load_tokenizer, train_bpe_tokenizer
from modeling_vaswani.evaluation.translation import load_translator

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(modeling_vaswani.__file__).resolve().parent
MODEL_CODE = PACKAGE / "model"  # exactly what save_pretrained copies
OUR_CODE = sorted([*PACKAGE.rglob("*.py"), *(REPO / "scripts").glob("*.py")])


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

UNSAFE_PATTERNS = {
    "torch.load": r"\btorch\.load\s*\(",
    "pickle": r"^\s*(import|from)\s+(c?pickle|dill|joblib|marshal)\b"
              r"|\b(c?pickle|dill|joblib|marshal)\.(load|loads|Unpickler)\b",
    "weights_only=False": r"weights_only\s*=\s*False",
    "allow_pickle=True": r"allow_pickle\s*=\s*True",
    "eval/exec": r"(?<![.\w])(eval|exec)\s*\(",
}


def test_the_unsafe_pattern_search_finds_what_it_looks_for():
    """Control: each pattern matches the usage it forbids (so the next test could fail)."""
    samples = {
        "torch.load": "state = torch.load(path)",
        "pickle": "import pickle",
        "weights_only=False": "x = f(path, weights_only=False)",
        "allow_pickle=True": "np.load(path, allow_pickle=True)",
        "eval/exec": "exec(source)",
    }
    for name, sample in samples.items():
        assert re.search(UNSAFE_PATTERNS[name], sample, re.MULTILINE), name
    assert not re.search(UNSAFE_PATTERNS["eval/exec"], "model.eval()")
    assert not re.search(UNSAFE_PATTERNS["pickle"], "refuses pickled weights")


@pytest.mark.parametrize("name", list(UNSAFE_PATTERNS))
def test_our_code_never_unpickles_or_executes(name):
    assert len(OUR_CODE) > 20 and any(path.name == "train.py" for path in OUR_CODE)
    offenders = [
        f"{path.relative_to(REPO)}:{text[: match.start()].count(chr(10)) + 1}"
        for path in OUR_CODE
        for text in [path.read_text(encoding="utf-8")]
        for match in re.finditer(UNSAFE_PATTERNS[name], text, re.MULTILINE)
    ]
    assert not offenders, f"{name} in {offenders}"


def test_save_pretrained_writes_safetensors_and_no_pickle(model_dir):
    names = {path.name for path in model_dir.iterdir()}
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
    average_checkpoints([model_dir, model_dir], tmp_path / "averaged")
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
from modeling_vaswani.training.tokenization import load_tokenizer

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
