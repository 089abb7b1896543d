"""Interrupted jobs and bad input text: half-written checkpoints, stopped translations, a tokenizer panic."""

import json
import os
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest
import torch
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments
from transformers.trainer_callback import TrainerState

from checks import (CHILD_ENV, SCRIPTS, assert_error_line, assert_names, copy_folder, edit_json, hostile_pickle,
                    run_script)
from modeling_vaswani.cli import run_main
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.training.checkpoint_averaging import (average_checkpoints, complete_checkpoints,
                                                         is_complete_checkpoint)
from modeling_vaswani.text_lines import read_lines
from modeling_vaswani.training.data import DEFAULT_DATA_DIR
from modeling_vaswani.training.trainer import VaswaniTrainer


@pytest.fixture(scope="module")
def english():
    return read_lines(DEFAULT_DATA_DIR / "train.en.gz")[:1000]


def _trainer(run, tokenizer, make_model, english, max_steps, save_steps):
    encoded = tokenizer(english[:8], truncation=True, max_length=16)
    data = datasets.Dataset.from_dict({"input_ids": encoded["input_ids"], "labels": encoded["input_ids"]})
    args = Seq2SeqTrainingArguments(output_dir=str(run), max_steps=max_steps, save_steps=save_steps,
                                    save_strategy="steps", per_device_train_batch_size=4, report_to="none",
                                    logging_strategy="no", eval_strategy="no", use_cpu=True, disable_tqdm=True)
    model = make_model(vocab_size=len(tokenizer))
    return VaswaniTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                          data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, trained_tokenizer, make_model, english):
    """A 2-step run saving checkpoint-1 and -2, and what each held when trainer_state.json was written."""
    run, before_state, original = tmp_path_factory.mktemp("run"), {}, TrainerState.save_to_json

    def recording_save(self, json_path):
        if (folder := Path(json_path).parent).name.startswith("checkpoint-"):
            before_state[folder.name] = sorted(os.listdir(folder))
        return original(self, json_path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainerState, "save_to_json", recording_save)
        _trainer(run, trained_tokenizer, make_model, english, max_steps=2, save_steps=1).train()
    return run, before_state


def test_an_interrupted_checkpoint_is_skipped_or_refused(run_dir, tmp_path, monkeypatch, capsys):
    """is_complete_checkpoint rests on the Trainer writing trainer_state.json last (transformers 5.24)."""
    assert sorted(run_dir[1]) == ["checkpoint-1", "checkpoint-2"]
    for name, listing in run_dir[1].items():
        assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "config.json"} <= set(listing)
        assert sorted(os.listdir(run_dir[0] / name)) == sorted(listing + ["trainer_state.json"])
    run = copy_folder(run_dir[0], tmp_path, "run")
    last = run / "checkpoint-2"  # killed while saving: weights cut, no trainer_state.json
    (last / "trainer_state.json").unlink()
    weights = last / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert is_complete_checkpoint(run / "checkpoint-1") and not is_complete_checkpoint(last)
    assert complete_checkpoints(run) == ([run / "checkpoint-1"], ["checkpoint-2"])
    code, err = run_script(monkeypatch, capsys, "average_checkpoints.py", "--run_dir", run, "--last", "2")
    assert_error_line(code, err, "--last 2", "checkpoint-1", "incomplete, left out: checkpoint-2")
    with pytest.raises(ValueError) as error:
        average_checkpoints([run / "checkpoint-1", last], tmp_path / "averaged")
    assert_names(error, "checkpoint-2", "trainer_state.json")
    assert not (tmp_path / "averaged").exists()
    code, err = run_script(monkeypatch, capsys, "train.py", "--output_dir", run, "--resume_from_checkpoint", last)
    assert_error_line(code, err, "checkpoint-2", "incomplete", alone=True)


def test_resuming_unpickles_only_with_the_restricted_loader_which_refuses_a_payload(run_dir, trained_tokenizer,
                                                                                     make_model, english, tmp_path,
                                                                                     monkeypatch):
    """The Trainer reads the checkpoint's pickles through torch.load(weights_only=True) only; a pickled payload is
    refused without suggesting weights_only=False."""
    run, calls, original = copy_folder(run_dir[0], tmp_path, "run"), [], torch.load

    def recording_load(file, *args, **kwargs):
        calls.append((os.path.basename(str(file)), kwargs.get("weights_only")))
        return original(file, *args, **kwargs)

    monkeypatch.setattr(torch, "load", recording_load)
    trainer = _trainer(run, trained_tokenizer, make_model, english, 3, 100)
    trainer.train(resume_from_checkpoint=str(run / "checkpoint-2"))
    assert {name for name, _ in calls} >= {"optimizer.pt", "scheduler.pt", "rng_state.pth"}, calls
    assert all(weights_only is True for _, weights_only in calls) and "training_args.bin" not in dict(calls)
    checkpoint, marker = run / "checkpoint-1", tmp_path / "payload-ran"
    (checkpoint / "rng_state.pth").write_bytes(hostile_pickle(marker))
    with pytest.raises(ValueError) as error:
        trainer._load_rng_state(str(checkpoint))
    assert_names(error, checkpoint, "pickled objects")
    assert "weights_only" not in str(error.value)
    assert error.value.__suppress_context__ and not marker.exists()


# --- translate.py: streaming, stopped ----------------------------------------------------------

# In a fresh process, translate the small file then the large one with translate.py's main(); the peak
# resident memory after each.
_MEASURE = """
import json, resource, runpy, sys
main, peaks = runpy.run_path(sys.argv[1])["main"], []
for path in sys.argv[3:]:
    main(["--model", sys.argv[2], "--file", path, "--output", path + ".out", "--num_beams", "1",
          "--max_new_tokens", "5", "--batch_size", "500", "--device", "cpu"])
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps(peaks))
"""


@pytest.mark.slow
def test_translating_a_file_streams_it_in_batches(saved_model_dir, english, tmp_path):
    sizes = (1_000, 10_000)
    files = [str(tmp_path / f"{lines}.en") for lines in sizes]
    for path, lines in zip(files, sizes):
        # Whitespace-only lines are copied through undecoded; they make the large file 80 MB, so reading it
        # whole would raise the peak far above the margin.
        Path(path).write_text("".join(f"{english[i % len(english)]}\n{' ' * 8000}\n" for i in range(lines)))
    result = subprocess.run([sys.executable, "-c", _MEASURE, str(SCRIPTS / "translate.py"), str(saved_model_dir),
                             *files], capture_output=True, text=True, env=CHILD_ENV, timeout=600)
    assert result.returncode == 0, result.stderr
    small, large = json.loads(result.stdout.strip().splitlines()[-1])
    growth_mb = (large - small) * (1 if sys.platform == "darwin" else 1024) / 2**20  # ru_maxrss: bytes or KiB
    assert growth_mb <= 30, f"peak memory grew by {growth_mb:.1f} MB from 1,000 to 10,000 lines"
    for path, lines in zip(files, sizes):
        outputs = Path(path + ".out").read_text(encoding="utf-8").split("\n")
        assert len(outputs) == 2 * lines + 1 and outputs[1] == outputs[-2] == ""  # blank lines stay empty


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_translation_keeps_every_finished_line(saved_model_dir, english, tmp_path, signum):
    """Stopped, translate.py leaves its finished lines, whole and in order, in --output and says how many."""
    source, output = tmp_path / "long.en", tmp_path / "long.de"
    lines = [english[i % len(english)] for i in range(3000)]
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "translate.py"), "--model", str(saved_model_dir), "--file", str(source),
         "--output", str(output), "--batch_size", "1", "--device", "cpu", "--num_beams", "1", "--max_new_tokens",
         "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV,
        # A test run in the background (`cmd &`) ignores SIGINT, and so would the child: a terminal's default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:  # until the first finished line is in the file written beside --output
        while process.poll() is None and not any(b"\n" in part.read_bytes() for part in tmp_path.glob(".long.de.*")):
            time.sleep(0.05)
        assert process.poll() is None, "translate.py ended before it could be stopped"
        process.send_signal(signum)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    written = output.read_text(encoding="utf-8")
    done = written.splitlines()
    assert process.returncode == 130 and written.endswith("\n") and 1 <= len(done) < len(lines), err
    assert_names(err, f"first {len(done)} lines", output)
    model, tokenizer = load_translator(str(saved_model_dir), device="cpu")
    assert done == translate(model, tokenizer, lines[:len(done)], batch_size=1, num_beams=1, max_new_tokens=40)


# --- results go beside, never into, a model folder ------------------------------------------------

def test_evaluation_writes_its_results_beside_the_model_and_never_into_another(saved_model_dir, tmp_path, monkeypatch,
                                                                               capsys):
    """`evaluate_model.py --model hub_card` used to write test-beam4.* into hub_card/."""
    model, other = copy_folder(saved_model_dir, tmp_path, "my-model"), copy_folder(saved_model_dir, tmp_path, "other")
    (tmp_path / "test.en").write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    runpy.run_path(str(SCRIPTS / "evaluate_model.py"))["main"](
        ["--model", str(model), "--source_file", "test.en", "--reference_file", "test.en", "--num_beams", "1",
         "--max_new_tokens", "3"])
    assert sorted(os.listdir(tmp_path / "evaluations" / "my-model")) == ["custom-beam1.hyp.txt",
                                                                         "custom-beam1.scores.json"]
    code, err = run_script(monkeypatch, capsys, "evaluate_model.py", "--model", model, "--output_dir", other)
    assert_error_line(code, err, other, "model folder", alone=True)
    assert sorted(os.listdir(model)) == sorted(os.listdir(other)) == sorted(os.listdir(saved_model_dir))


# --- a tokenizer that panics (pyo3's PanicException, a BaseException) on a line --------------------

# A nested quantifier backtracks exponentially on a run of "a" that does not end the text.
BACKTRACKING = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
PANIC_LINE = "a" * 40 + "b"


def test_a_tokenizer_panic_is_a_value_error_and_through_a_script_one_line(folder, tmp_path, monkeypatch, capsys):
    """translate(), translate.py on a file; run_main turns a panic, and no other BaseException, into one line."""
    edit_json(folder / "tokenizer.json", pre_tokenizer=BACKTRACKING)
    model, tokenizer = load_translator(str(folder), device="cpu")
    with pytest.raises(ValueError) as error:
        translate(model, tokenizer, ["fine", PANIC_LINE], num_beams=1, max_new_tokens=2)
    assert_names(error, "tokenizer failed", "2 sentences", "retry-limit")
    assert "\n" not in str(error.value)
    assert tokenizer(["A dog.", "bbb"], return_tensors="pt", padding=True)["input_ids"].shape[0] == 2  # other text
    (tmp_path / "in.txt").write_text(f"fine\n{PANIC_LINE}\n")
    code, err = run_script(monkeypatch, capsys, "translate.py", "--model", folder, "--num_beams", "1",
                           "--max_new_tokens", "2", "--file", tmp_path / "in.txt", "--output", tmp_path / "o.txt")
    assert_error_line(code, err, "The tokenizer failed", "tokenizer.json")

    def raising(name, message):
        def main():
            raise type(name, (BaseException,), {})(message)
        return main

    with pytest.raises(SystemExit) as stop:  # a panic anywhere under a script's main (training tokenizes too)
        run_main(raising("PanicException", "Onig: Regex search error: retry-limit"))
    assert_error_line(stop.value.code, capsys.readouterr().err, "the tokenizer failed", "Onig", alone=True)
    with pytest.raises(BaseException) as error:
        run_main(raising("Unexpected", "unexpected"))
    assert type(error.value).__name__ == "Unexpected"
