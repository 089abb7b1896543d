"""A saved tokenizer is transformers' standard fast tokenizer (`TokenizersBackend`): its files need no code of ours,
and tokenizer_config.json holds no loader state. AutoTokenizer reads config.json (auto_map) first and would ask
whether to run the model's code; trust_remote_code=False (or the class itself) loads it at once."""

import json
import os
import subprocess
import sys

import pytest

from checks import SCRIPTS
from modeling_vaswani.tokenizer_loading import load_tokenizer

HUB_CARD = SCRIPTS.parent / "hub_card"
SENTENCES = ["Two dogs are playing in the snow.", "Ein Mann fährt Fahrrad."]
LOADER_STATE = {"is_local", "local_files_only", "max_length", "stride", "truncation_side", "truncation_strategy",
                "name_or_path", "auto_map"}

CHILD = """
import json, sys
sys.modules["modeling_vaswani"] = None  # as on a machine without this package
from transformers import AutoTokenizer, PreTrainedTokenizerFast
folder, sentences = sys.argv[1], json.loads(sys.argv[2])
report = {}
for name, load in (("class", lambda: PreTrainedTokenizerFast.from_pretrained(folder)),
                   ("auto", lambda: AutoTokenizer.from_pretrained(folder, trust_remote_code=False))):
    tokenizer = load()
    report[name] = [type(tokenizer).__module__ + "." + type(tokenizer).__name__,
                    [tokenizer(s)["input_ids"] for s in sentences], tokenizer.pad_token_id, tokenizer.eos_token_id]
print(json.dumps(report))
"""


def expected_ids(folder):
    return [load_tokenizer(folder)(s)["input_ids"] for s in SENTENCES]


@pytest.mark.parametrize("where", ["hub_card", "saved"])
def test_tokenizer_config_names_the_standard_class_and_no_loader_state(where, saved_model_dir):
    folder = HUB_CARD if where == "hub_card" else saved_model_dir
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] in ("TokenizersBackend", "PreTrainedTokenizerFast")
    assert not LOADER_STATE & config.keys(), LOADER_STATE & config.keys()
    assert (config["pad_token"], config["bos_token"], config["eos_token"], config["unk_token"]) == (
        "<pad>", "<s>", "</s>", "<unk>")
    assert not list(folder.glob("tokeniz*.py"))  # no tokenizer code of ours travels


def test_a_tokenizer_loaded_and_saved_again_writes_the_same_config(saved_model_dir, tmp_path, monkeypatch):
    # Offline loading puts local_files_only (and tokenizer.json's truncation) into init_kwargs;
    # save_pretrained must not write them back (scripts/push_to_hub.py saves a loaded tokenizer).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_tokenizer(saved_model_dir).save_pretrained(tmp_path)
    again = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert not LOADER_STATE & again.keys(), LOADER_STATE & again.keys()
    original = json.loads((saved_model_dir / "tokenizer_config.json").read_text())
    assert {key: again.get(key) for key in original} == original  # (padding, if tokenizer.json holds it, may be added)
    assert expected_ids(tmp_path) == expected_ids(saved_model_dir)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["hub_card", "saved"])
def test_tokenizer_loads_without_code_and_without_a_prompt_in_a_clean_process(where, saved_model_dir, tmp_path):
    folder = HUB_CARD if where == "hub_card" else saved_model_dir
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    # stdin stays open: a [y/N] question would wait for an answer (transformers gives up after 15 s).
    done = subprocess.run([sys.executable, "-I", "-c", CHILD, str(folder), json.dumps(SENTENCES)], cwd=tmp_path,
                          env=env, stdin=subprocess.PIPE, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[y/N]" not in done.stdout + done.stderr and "custom code" not in done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("class", "auto"):
        module_and_class, ids, pad, eos = report[name]
        assert module_and_class == "transformers.tokenization_utils_tokenizers.TokenizersBackend"
        assert ids == expected_ids(folder) and (pad, eos) == (0, 2)
