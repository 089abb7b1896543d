"""Our code never unpickles, ships only its own model code and never touches the network.

- Weights are written and read as safetensors only: our code has no `torch.load` or `pickle`, and
  `save_pretrained` writes no pickle. (What the loaders do with a pickle, foreign code or damage
  inside a folder: test_model_folders.py.)
- The code `save_pretrained` copies into a folder (for `trust_remote_code`) is exactly the
  package's model code.
- With HF_HUB_OFFLINE=1, importing the package, loading a folder (with `trust_remote_code` too),
  loading the BLEU metric and generating make no network connection.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import modeling_vaswani

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(modeling_vaswani.__file__).resolve().parent
MODEL_CODE = PACKAGE / "model"  # exactly what save_pretrained copies


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
# The one permitted use, and why:
ALLOWED = {
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


def test_save_pretrained_writes_safetensors_and_no_pickle(saved_model_dir):
    names = {path.relative_to(saved_model_dir).as_posix() for path in saved_model_dir.rglob("*") if path.is_file()}
    assert "model.safetensors" in names
    # JSON, the tokenizer's JSON and Python source are all there is: nothing that unpickles.
    assert all(name.endswith((".json", ".py", ".safetensors")) for name in names), names
    assert not {name for name in names if name.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle"))}


# --- no foreign code ---------------------------------------------------------------------------


def _relative_imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return {f"{node.module}.py" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_copied_code_is_exactly_the_model_modules(saved_model_dir):
    # What save_pretrained should copy: the config and model modules and all they import from the
    # package, transitively (design note: "Why the package is flat").
    expected, todo = set(), ["modeling_vaswani.py", "configuration_vaswani.py"]
    while todo:
        name = todo.pop()
        if name not in expected:
            expected.add(name)
            todo.extend(_relative_imports(MODEL_CODE / name))
    copied = {path.name for path in saved_model_dir.glob("*.py")}
    assert copied == expected
    for name in copied:
        assert (saved_model_dir / name).read_bytes() == (MODEL_CODE / name).read_bytes(), name
    # custom_generate/generate.py, the only code outside the flat modules, is the package's byte for byte.
    nested = {path.relative_to(saved_model_dir).as_posix() for path in saved_model_dir.rglob("*.py")} - copied
    assert nested == {"custom_generate/generate.py"}
    assert (saved_model_dir / "custom_generate" / "generate.py").read_bytes() == (
        MODEL_CODE / "custom_generate" / "generate.py").read_bytes()
    config = json.loads((saved_model_dir / "config.json").read_text())
    referenced = {ref.split(".")[0] + ".py" for ref in config["auto_map"].values()}
    referenced |= {spec["impl"].split(".")[0] + ".py" for spec in config["custom_pipelines"].values()}
    assert referenced <= copied


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
def test_no_network_access_offline(saved_model_dir, tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"), OMP_NUM_THREADS="1",
               PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", _OFFLINE_CHILD, str(saved_model_dir)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # Only the control attempt at the very end was made.
    assert report["attempts"] == ["create_connection(('huggingface.co', 443),)"], report["attempts"]
    assert report["outputs"][0] == report["outputs"][1]
    assert report["bleu"] == pytest.approx(100.0)
    assert isinstance(report["translated"][0]["translation_text"], str)
