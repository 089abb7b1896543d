"""End to end: scripts/train.py as a user runs it, in a subprocess, on a tiny model."""

import json
import math
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

import modeling_vaswani  # noqa: F401  (registers the model with the Auto classes)
from modeling_vaswani.machine import cpp_compiler
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.data import load_multi30k
from training_runs import (DATA, EAGER, ENV, RECORDED_BENCHMARK, REPO, RESUME, RUN, STEPS, TIMEOUT, TRAIN, _json,
                           run_script, train)

pytestmark = pytest.mark.slow


def weights(folder):
    return load_file(str(Path(folder) / "model.safetensors"))


def batches_per_epoch(log):  # all processes together
    return int(re.search(r"token-budget batches: (\d+) per epoch", log).group(1))


def test_short_run_learns_evaluates_saves_and_averages(base_run):
    output, log = base_run
    state = _json(output / "trainer_state.json")
    assert state["global_step"] == STEPS
    logged = [(entry["step"], entry["loss"]) for entry in state["log_history"] if "loss" in entry]
    assert [step for step, _ in logged] == [1, *range(5, STEPS + 1, 5)]  # the first step too
    losses = [loss for _, loss in logged]
    # Evaluated at step 40 once: the step's own evaluation is the final one.
    assert [e["step"] for e in state["log_history"] if "eval_loss" in e] == [STEPS]
    assert losses[-1] < losses[0] - 0.5  # starts near ln(500) ≈ 6.2

    metrics = _json(output / "eval_results.json")
    assert 0.0 <= metrics["eval_bleu"] <= 100.0 and metrics["eval_loss"] < losses[0]

    # §6.1: averaged/ holds the mean of the last two checkpoints and loads like any model.
    assert sorted(p.name for p in output.glob("checkpoint-*")) == [f"checkpoint-{s}" for s in (10, 20, 30, 40)]
    last, before = weights(output / "checkpoint-40"), weights(output / "checkpoint-30")
    averaged = AutoModelForSeq2SeqLM.from_pretrained(output / "averaged")
    for name, tensor in averaged.state_dict().items():
        if name in last:
            torch.testing.assert_close(tensor, (last[name] + before[name]) / 2, rtol=1e-6, atol=1e-7)
    assert "eval_averaged_bleu" in _json(output / "averaged" / "eval_results.json")

    # run_info.json, for the model card: the command, its minutes, threads (one: OMP_NUM_THREADS), batching.
    (segment,) = _json(output / "run_info.json")["segments"]
    assert segment["command"].startswith("python scripts/train.py --preset tiny") and segment["minutes"] > 0
    assert (segment["threads"], segment["processes"]) == (1, 1) and ", 1 thread," in segment["hardware"]
    assert segment["batching"]["max_tokens_per_batch"] == segment["batching"]["max_tokens_per_step"] == 1024
    assert 512 < segment["batching"]["tokens_per_step"]["target"] <= 1024
    # The last line names the one next step.
    assert log.strip().splitlines()[-1] == (f"saved the model in {output}; next: python scripts/evaluate_model.py "
                                            f"--model {output / 'averaged'} --split test")
    assert "pin_memory" not in log and "Writing model shards" not in log

    # The folder reloads with its tokenizer and generation settings, and translates.
    model = AutoModelForSeq2SeqLM.from_pretrained(output).eval()
    tokenizer = load_tokenizer(output)
    assert type(model).__name__ == "VaswaniForConditionalGeneration" and model.config.vocab_size == len(tokenizer)
    assert len(tokenizer) <= 500
    for name, tensor in weights(output).items():
        assert torch.equal(model.state_dict()[name], tensor)
    assert model.generation_config.num_beams == 4 and model.generation_config.length_penalty == 0.6
    batch = tokenizer([load_multi30k()["train"][0]["translation"]["en"], "A dog runs."], padding=True,
                      return_tensors="pt")
    generated = model.generate(**batch, num_beams=1, max_new_tokens=12)  # 40 steps: not German yet
    assert generated.shape[0] == 2 and (generated[:, 0] == model.config.decoder_start_token_id).all()


def _killable(output_dir, checkpoint):
    """checkpoint is whole (trainer_state.json is written last) and run_info.json has counted its minutes."""
    segments = (_json(output_dir / "run_info.json") or {}).get("segments")
    return (_json(checkpoint / "trainer_state.json") is not None and (checkpoint / "model.safetensors").is_file()
            and bool(segments) and (segments[-1].get("minutes") or 0) > 0)


def test_killed_and_resumed_run_ends_with_the_same_weights(base_run, tmp_path):
    output, _ = base_run
    resumed = tmp_path / "resumed"
    checkpoint = resumed / "checkpoint-10"
    # The same run, but told to go on far longer, so that it is surely still training when killed
    # (Eq. (3) and the batch order do not depend on the total number of steps).
    process = subprocess.Popen([sys.executable, TRAIN, *RUN, "--max_steps", "100000", "--output_dir", str(resumed)],
                               cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not _killable(resumed, checkpoint):
            assert process.poll() is None, "the run ended before writing checkpoint-10"
            assert time.monotonic() < deadline, "no checkpoint-10 in time"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert not (resumed / "model.safetensors").exists()  # it never got to the end

    train(*RESUME, "--max_steps", STEPS, "--output_dir", resumed, "--resume_from_checkpoint", checkpoint)
    state = _json(resumed / "trainer_state.json")
    assert state["global_step"] == STEPS
    expected, got = weights(output), weights(resumed)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    # The losses logged after the resume point are the uninterrupted run's, step for step.
    base_log = _json(output / "trainer_state.json")["log_history"]
    after = [(e["step"], e["loss"]) for e in state["log_history"] if "loss" in e and e["step"] > 10]
    assert after == [(e["step"], e["loss"]) for e in base_log if "loss" in e and e["step"] > 10]
    # Both invocations are in the run's record, the killed one with its minutes up to checkpoint-10.
    killed, resuming = _json(resumed / "run_info.json")["segments"]
    assert "--resume_from_checkpoint" not in killed["command"] and killed["minutes"] > 0
    assert "--resume_from_checkpoint" in resuming["command"] and resuming["minutes"] > 0


def test_torchrun_two_processes_share_the_batches_and_resume_mid_epoch_exactly(tmp_path):
    # Two epochs, a checkpoint after every step; a resume from the middle of the second epoch must end with
    # the same weights (its batches are epoch 1's, not epoch 0's).
    def torchrun(output, *extra):
        return run_script("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", TRAIN, *DATA,
                          "--max_eval_samples", "8", "--num_train_epochs", "2", "--warmup_steps_noam", "10", "--seed",
                          "3", "--logging_steps", "1", "--eval_strategy", "epoch", "--save_strategy", "steps",
                          "--save_steps", "1", "--save_total_limit", "30", "--output_dir", output, *extra)

    output = tmp_path / "ddp"
    result = torchrun(output)
    # Each process runs its own half of the epoch's batches, as train.py announces.
    total = batches_per_epoch(result.stderr)
    per_process = math.ceil(total / 2)
    assert f"token-budget batches: {total} per epoch, {per_process} per process" in result.stderr
    state = _json(output / "trainer_state.json")
    assert total > 4
    assert next(e["epoch"] for e in state["log_history"] if e.get("step") == per_process) == 1.0
    assert "eval_bleu" in _json(output / "eval_results.json")
    # --max_tokens is the optimizer step's: each process's batches hold half of it.
    (segment,) = _json(output / "run_info.json")["segments"]
    batching = segment["batching"]
    assert (segment["processes"], batching["max_tokens_per_step"], batching["max_tokens_per_batch"]) == (2, 1024, 512)
    assert batching["steps_per_epoch"] == per_process
    assert 512 < batching["tokens_per_step"]["target"] <= 1024 and batching["tokens_per_step"]["source"] <= 1024
    assert "tokens per step" in result.stderr and "parallel_mode != ParallelMode.DISTRIBUTED" not in result.stderr

    resumed = tmp_path / "resumed"
    middle = f"checkpoint-{per_process + 2}"  # two steps into the second epoch
    shutil.copytree(output / middle, resumed / middle)
    torchrun(resumed, "--resume_from_checkpoint", str(resumed / middle))
    expected, got = weights(output), weights(resumed)
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_a_time_budget_covers_the_whole_streamed_run_and_no_step_is_evaluated_twice(tmp_path):
    # How the stop is timed: tests/training/test_run_clocks.py, on a fake clock; here, what a stopped run leaves,
    # streaming local data files. A small evaluation keeps the closing work short, so that a slow machine has time
    # for steps too.
    rows = load_multi30k("en", "de")["train"].select(range(120))["translation"]
    train_file, validation = tmp_path / "train.jsonl", tmp_path / "validation.tsv"
    train_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    validation.write_text("de\ten\n" + "".join(f"{r['de']}\t{r['en']}\n" for r in rows[:6]), encoding="utf-8")
    output = tmp_path / "budget"
    result = train("--streaming", "--train_file", train_file, "--validation_file", validation, "--shuffle_buffer", "50",
                   "--preset", "tiny", "--vocab_size", "200", "--max_tokens", "512", "--report_to", "none",
                   "--disable_tqdm", "true", "--max_steps", "100000", "--max_train_minutes", 1.0, "--eval_strategy",
                   "steps", "--eval_steps", "25", "--generation_max_length", "8", "--save_every_minutes", "0.1",
                   "--average_last", "3", "--output_dir", output, HF_DATASETS_CACHE=str(tmp_path / "cache"))
    assert re.search(r"stopped at step \d+ after [\d.]+ minutes", result.stderr)
    assert "token-budget batches of a stream, formed 50 examples at a time" in result.stderr

    state = _json(output / "trainer_state.json")
    history, steps = state["log_history"], state["global_step"]
    evaluated = [e["step"] for e in history if "eval_loss" in e]
    assert len(evaluated) == len(set(evaluated)) and evaluated[-1] == steps
    assert [e["step"] for e in history if "loss" in e][-1] == steps  # the last loss is logged
    assert (output / "model.safetensors").is_file() and (output / f"checkpoint-{steps}").is_dir()
    assert "eval_bleu" in _json(output / "eval_results.json")
    # How many checkpoints fit depends on the machine's speed: averaged when two or more were written.
    if len(list(output.glob("checkpoint-*"))) >= 2:
        assert (output / "averaged" / "eval_results.json").is_file()
    else:
        assert "nothing to average" in result.stderr
    (segment,) = _json(output / "run_info.json")["segments"]
    assert segment["minutes"] > 0 and segment["batching"]["shuffle_buffer"] == 50
    assert segment["batching"]["examples_in_first_buffer"] == 50


def next_step(output):  # the command after `next: ` in a script's last line
    return shlex.split(output.strip().splitlines()[-1].split("next: ", 1)[1])


def test_a_short_run_goes_from_training_to_a_shareable_folder_by_the_next_steps_it_names(tmp_path):
    run = tmp_path / "run"
    result = train(*DATA, "--max_steps", "12", "--save_strategy", "steps", "--save_steps", "4",
                   "--eval_strategy", "no", "--output_dir", run)
    command = next_step(result.stderr)
    assert command[:2] == ["python", "scripts/average_checkpoints.py"]
    result = run_script("average_checkpoints.py", *command[2:])  # 3 checkpoints: averaged, with a note
    assert "fewer than the paper's 5; averaging all 3" in result.stderr
    command = next_step(result.stdout)
    assert command[:2] == ["python", "scripts/evaluate_model.py"] and command[3] == str(run / "averaged")
    run_script("evaluate_model.py", *command[2:], "--max_samples", "8", "--num_beams", "1", "--max_new_tokens", "5",
               "--output_dir", tmp_path / "scores")
    assert list((tmp_path / "scores").glob("test-*.scores.json"))
    # The model card's numbers (the whole validation split, four decodings), then the folder, without uploading.
    run_script("collect_results.py", "--run_dir", run, "--splits", "validation", "--output_dir", tmp_path / "decoded",
               "--also_beams", "--speed_from", RECORDED_BENCHMARK)
    assert (run / "averaged" / "results.json").is_file()
    run_script("push_to_hub.py", "--model_dir", run / "averaged", "--repo_id", "you/tiny", "--dry_run",
               "--output_dir", tmp_path / "hub")
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    assert "## Speed" in card and "| CTranslate2 float32 | 1 |" in card


@pytest.mark.skipif(torch.accelerator.is_available() or cpp_compiler() is None, reason="compiled by default on a CPU "
                    "where inductor finds a C++ compiler")
def test_on_a_cpu_a_run_compiles_each_layer_by_default_a_handful_of_times_and_says_so(tmp_path):
    compiled = DATA[:-len(EAGER)]  # with dropout: its masks are one opaque op in the compiled graphs
    result = train(*compiled, "--dropout", "0.1", "--max_steps", "8", "--eval_strategy", "no", "--save_strategy", "no",
                   "--output_dir", tmp_path / "run")
    step = re.search(r"training step: (.*)", result.stderr).group(1)
    assert "each layer compiled" in step and re.search(r"float32 products through (oneDNN|torch\.mm) \(measured", step)
    graphs = int(re.search(r"torch.compile: (\d+) graphs compiled in [\d.]+ s", result.stderr).group(1))
    assert 1 <= graphs <= 8  # batches of several lengths: each stack's layers once static, once dynamic
    losses = [e["loss"] for e in _json(tmp_path / "run" / "trainer_state.json")["log_history"] if "loss" in e]
    assert losses and all(math.isfinite(loss) for loss in losses)
    assert AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "run").num_parameters() > 0
