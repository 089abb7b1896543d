"""End-to-end test: a saved model folder works with `trust_remote_code=True` where this package is absent.

`save_pretrained` copies the model's code into the folder (flat, one file per module) and writes
`auto_map` and `custom_pipelines` into config.json; a user who only has transformers then loads it
with `AutoModelForSeq2SeqLM` and `pipeline("translation", ...)`.
"""

import json
import os
import subprocess
import sys

import pytest

SENTENCE = "A man is riding a bicycle."

# Runs in a fresh interpreter in which `import modeling_vaswani` fails, as on a user's machine.
CHILD = f"""
import sys; sys.modules['modeling_vaswani'] = None
import json
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

folder = sys.argv[1]
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
# The tokenizer's loader reads config.json, whose auto_map also points at the folder's code.
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
inputs = tokenizer([{SENTENCE!r}], return_tensors="pt")
generated = model.generate(**inputs, num_beams=1, max_new_tokens=5)
translator = pipeline("translation", model=folder, trust_remote_code=True)
result = translator({SENTENCE!r}, num_beams=1, max_new_tokens=5)
print(json.dumps(dict(
    model_class=type(model).__name__,
    model_module=type(model).__module__,
    generated=generated.tolist(),
    pipeline_class=type(translator).__name__,
    result=result,
    imported=[name for name, module in sys.modules.items() if name.startswith("modeling_vaswani") and module],
)))
"""


def test_saved_code_is_the_package_code_byte_for_byte(saved_model_dir, model_code_dir):
    path = saved_model_dir
    saved = sorted(p.name for p in path.glob("*.py"))
    # The folder tells what ships: every module of modeling_vaswani/model/, and nothing else.
    assert saved == sorted(p.name for p in model_code_dir.glob("*.py") if p.name != "__init__.py")
    for name in saved:
        assert (path / name).read_bytes() == (model_code_dir / name).read_bytes(), name
    # Where transformers looks for a model's own generate (trust_remote_code): a hand-over to the model's.
    assert sorted(p.relative_to(path).as_posix() for p in path.glob("*/*.py")) == ["custom_generate/generate.py"]
    assert (path / "custom_generate" / "generate.py").read_bytes() == (
        model_code_dir / "custom_generate" / "generate.py").read_bytes()


def test_config_json_points_at_the_saved_code(saved_model_dir):
    path = saved_model_dir
    config = json.loads((path / "config.json").read_text())
    assert config["auto_map"]["AutoConfig"] == "configuration_vaswani.VaswaniConfig"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_vaswani.VaswaniForConditionalGeneration"
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_vaswani.VaswaniTranslationPipeline"
    assert config["custom_pipelines"]["translation"]["pt"] == ["AutoModelForSeq2SeqLM"]
    for entry in list(config["auto_map"].values()) + [config["custom_pipelines"]["translation"]["impl"]]:
        assert (path / (entry.split(".")[0] + ".py")).is_file()


@pytest.mark.slow
def test_loads_and_translates_without_the_package(saved_model_dir, translation_model, tokenizer):
    path = saved_model_dir  # translation_model and tokenizer, saved
    expected = translation_model.generate(**tokenizer([SENTENCE], return_tensors="pt"), num_beams=1, max_new_tokens=5)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(path.parent / "modules"),
           "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    completed = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=path, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["model_class"] == "VaswaniForConditionalGeneration"
    assert report["model_module"].startswith("transformers_modules.")  # the folder's copy of the code
    assert report["imported"] == []
    assert report["generated"] == expected.tolist()  # same weights, same code, same tokens
    assert report["pipeline_class"] == "VaswaniTranslationPipeline"
    result = report["result"]
    assert isinstance(result, list) and len(result) == 1
    assert list(result[0]) == ["translation_text"] and isinstance(result[0]["translation_text"], str)
