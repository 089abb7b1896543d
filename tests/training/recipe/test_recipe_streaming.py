"""scripts/train.py's data flags: --streaming, --shuffle_buffer, --train_file and --validation_file."""

import json
import os
import subprocess
import sys

import pytest

from modeling_vaswani.training.data import DataError, load_multi30k
from modeling_vaswani.training.recipe.checks import parse_options
from modeling_vaswani.training.batching import DEFAULT_SHUFFLE_BUFFER


def _refused(capsys, *argv):
    with pytest.raises(SystemExit):
        parse_options(list(argv))
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_flags_that_cannot_stream_or_name_two_datasets_are_refused(capsys):
    assert "--streaming needs --max_steps" in _refused(capsys, "--streaming")
    assert "give --max_tokens N, not 0" in _refused(capsys, "--streaming", "--max_steps", "5", "--max_tokens", "0")
    assert "not both" in _refused(capsys, "--train_file", "a.jsonl", "--train_source", "a.en", "--train_target", "a.de")
    assert "not both" in _refused(capsys, "--validation_file", "v.csv", "--validation_source", "v.en",
                                  "--validation_target", "v.de")
    assert "give one" in _refused(capsys, "--dataset_name", "wmt14", "--train_file", "a.jsonl")


def test_defaults_and_several_files():
    options = parse_options(["--train_file", "a.jsonl", "b.jsonl", "--streaming", "--max_steps", "5"])
    assert options.train_file == ["a.jsonl", "b.jsonl"] and options.streaming
    assert options.shuffle_buffer == DEFAULT_SHUFFLE_BUFFER
    assert parse_options(["--shuffle_buffer", "500"]).shuffle_buffer == 500


def test_a_data_file_without_the_language_columns_is_one_clear_error(tmp_path, monkeypatch):
    import datasets

    from modeling_vaswani.training.recipe.run import load_data

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    bad = tmp_path / "pairs.csv"
    bad.write_text("english,german\nHello,Hallo\n", encoding="utf-8")
    options = parse_options(["--train_file", str(bad)])
    with pytest.raises(DataError) as err:
        load_data(options)
    assert str(err.value).startswith(f"{bad}: no columns for en-de pairs; found ['english', 'german'], expected")


@pytest.mark.slow
def test_train_script_streams_local_data_files(tmp_path, repo_root):
    rows = load_multi30k("en", "de")["train"].select(range(120))["translation"]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    validation = tmp_path / "validation.tsv"
    validation.write_text("de\ten\n" + "".join(f"{r['de']}\t{r['en']}\n" for r in rows[:6]), encoding="utf-8")
    output = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_DATASETS_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, str(repo_root / "scripts" / "train.py"), "--streaming", "--train_file", str(train),
               "--validation_file", str(validation), "--max_steps", "3", "--shuffle_buffer", "50", "--preset", "tiny",
               "--vocab_size", "200", "--max_tokens", "512", "--report_to", "none", "--disable_tqdm", "true",
               "--output_dir", str(output)]
    result = subprocess.run(command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "token-budget batches of a stream, formed 50 examples at a time" in result.stderr
    assert json.loads((output / "trainer_state.json").read_text())["global_step"] == 3
    (segment,) = json.loads((output / "run_info.json").read_text())["segments"]
    assert segment["batching"]["shuffle_buffer"] == 50 and segment["batching"]["examples_in_first_buffer"] == 50
    assert "eval_bleu" in json.loads((output / "eval_results.json").read_text())
    assert (output / "model.safetensors").is_file()
