"""Interrupted jobs and large inputs: no half-written folder loads as a model, memory stays flat.

- `save_pretrained` writes code, config.json, generation_config.json and the weights last, each
  straight into the final folder; a process killed on the way leaves one of the states that
  test_model_folders.py builds, and each must fail to load instead of giving a wrong model.
- The Trainer writes a `checkpoint-<step>` folder in place too, with trainer_state.json last;
  checkpoint averaging and resuming refuse a folder without it.
- scripts/translate.py reads a file a batch at a time, so its peak memory does not grow with the
  file; it refuses to write over its own input, and stopped (Ctrl-C, SIGTERM) it leaves every
  finished line in --output, whole and in order.
- Evaluation results go to a folder of their own, never into a model folder.
- Resuming training unpickles the Trainer's optimizer, scheduler and RNG state only through torch's
  weights_only loader, so a hostile pickle there does not run.
"""

import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest
import torch
import transformers.modeling_utils
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments
from transformers.trainer_callback import TrainerState

from checks import assert_error_line, run_script
from checks import assert_names
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.training.checkpoint_averaging import average_checkpoints, find_checkpoints, is_complete_checkpoint
from modeling_vaswani.training.data import DEFAULT_DATA_DIR, read_lines
from modeling_vaswani.training.trainer import VaswaniTrainer

REPO = Path(__file__).resolve().parents[2]
CODE_FILES = {"configuration_vaswani.py", "modeling_vaswani.py"}  # two of the copied modules, enough to recognise


@pytest.fixture(scope="module")
def english():
    return read_lines(DEFAULT_DATA_DIR / "train.en.gz")[:1000]


# --- the order of the writes -------------------------------------------------------------------


def test_save_pretrained_writes_the_weights_last(make_model, tmp_path, monkeypatch):
    """The interrupted states of test_model_folders.py rest on this order (transformers 5.24,
    `save_pretrained`)."""
    seen = []
    original = transformers.modeling_utils.safe_save_file

    def recording_save(tensors, filename, *args, **kwargs):
        seen.append(sorted(os.listdir(os.path.dirname(filename))))
        return original(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", recording_save)
    make_model().save_pretrained(tmp_path / "m")
    assert len(seen) == 1
    assert {"config.json", "generation_config.json"} | CODE_FILES <= set(seen[0])
    assert sorted(os.listdir(tmp_path / "m")) == sorted(seen[0] + ["model.safetensors"])


# --- Trainer checkpoints interrupted -----------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, trained_tokenizer, make_model, english):
    """A 2-step training run that saves checkpoint-1 and checkpoint-2, recording what each save held
    at the moment trainer_state.json was written."""
    run = tmp_path_factory.mktemp("run")
    tokenizer = trained_tokenizer
    encoded = tokenizer(english[:8], truncation=True, max_length=16)
    data = datasets.Dataset.from_dict({"input_ids": encoded["input_ids"], "labels": encoded["input_ids"]})
    args = Seq2SeqTrainingArguments(
        output_dir=str(run), max_steps=2, save_steps=1, save_strategy="steps", per_device_train_batch_size=4,
        report_to="none", logging_strategy="no", eval_strategy="no", use_cpu=True, disable_tqdm=True,
    )
    model = make_model(vocab_size=len(tokenizer))
    trainer = VaswaniTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                             data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))
    before_state = {}
    original = TrainerState.save_to_json

    def recording_save(self, json_path):
        folder = os.path.dirname(json_path)
        if os.path.basename(folder).startswith("checkpoint-"):
            before_state[os.path.basename(folder)] = sorted(os.listdir(folder))
        return original(self, json_path)

    TrainerState.save_to_json = recording_save
    try:
        trainer.train()
    finally:
        TrainerState.save_to_json = original
    return run, before_state


def test_trainer_writes_trainer_state_json_last(run_dir):
    """`is_complete_checkpoint` rests on this order (transformers 5.24, `Trainer._save_checkpoint`)."""
    run, before_state = run_dir
    assert sorted(before_state) == ["checkpoint-1", "checkpoint-2"]
    for name, listing in before_state.items():
        assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "config.json"} <= set(listing)
        assert "trainer_state.json" not in listing
        assert sorted(os.listdir(run / name)) == sorted(listing + ["trainer_state.json"])
        assert is_complete_checkpoint(run / name)


@pytest.fixture
def killed_run(run_dir, tmp_path):
    """The run as a kill during the save of checkpoint-2 leaves it: weights cut, no trainer_state.json."""
    run = Path(shutil.copytree(run_dir[0], tmp_path / "run"))
    last = run / "checkpoint-2"
    (last / "trainer_state.json").unlink()
    (last / "optimizer.pt").unlink()
    weights = last / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return run


def test_find_checkpoints_skips_an_interrupted_checkpoint(killed_run):
    assert not is_complete_checkpoint(killed_run / "checkpoint-2")
    assert find_checkpoints(killed_run, 1) == [killed_run / "checkpoint-1"]
    expected = r"only 1 complete checkpoint-<step> folders \(skipped incomplete: checkpoint-2\)"
    with pytest.raises(ValueError, match=expected):
        find_checkpoints(killed_run, 2)


def test_average_checkpoints_refuses_an_interrupted_checkpoint(killed_run, tmp_path):
    with pytest.raises(ValueError) as error:
        average_checkpoints([killed_run / "checkpoint-1", killed_run / "checkpoint-2"], tmp_path / "averaged")
    assert_names(error, "checkpoint-2", "trainer_state.json")
    assert not (tmp_path / "averaged").exists()


def test_average_last_after_a_kill_uses_complete_checkpoints(killed_run, tmp_path):
    weights = average_checkpoints(find_checkpoints(killed_run, 1), tmp_path / "averaged")
    model = VaswaniForConditionalGeneration.from_pretrained(weights.parent)
    saved = VaswaniForConditionalGeneration.from_pretrained(killed_run / "checkpoint-1")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), saved.state_dict().values()))


def test_resuming_from_an_interrupted_checkpoint_is_refused(killed_run, monkeypatch, capsys):
    code, err = run_script(monkeypatch, capsys, "train.py", "--output_dir", killed_run,
                           "--resume_from_checkpoint", killed_run / "checkpoint-2")
    assert_error_line(code, err, "checkpoint-2", "incomplete", alone=True)


# --- streaming a large file through translate.py -----------------------------------------------

# In a fresh process, translate the small file and then the large one with scripts/translate.py's
# own main(), and report the peak resident memory after each.
_MEASURE = """
import json, resource, runpy, sys
main = runpy.run_path(sys.argv[1])["main"]
peaks = []
for path in sys.argv[3:]:
    main(["--model", sys.argv[2], "--file", path, "--output", path + ".out", "--num_beams", "1",
          "--max_new_tokens", "5", "--batch_size", "500", "--device", "cpu"])
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps(peaks))
"""
# Whitespace-only lines are copied through without decoding; these make the large file 80 MB, so
# reading it whole (instead of a batch at a time) would raise the peak far above the margin.
_PAD = " " * 8000
MARGIN_MB = 30


@pytest.mark.slow
def test_translating_a_file_streams_it_in_batches(saved_model_dir, english, tmp_path):
    files = []
    for lines in (1_000, 10_000):
        path = tmp_path / f"{lines}.en"
        with path.open("w", encoding="utf-8") as handle:
            for i in range(lines):
                handle.write(f"{english[i % len(english)]}\n{_PAD}\n")
        files.append(str(path))
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(REPO / "scripts" / "translate.py"), str(saved_model_dir), *files],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    small, large = json.loads(result.stdout.strip().splitlines()[-1])
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss counts bytes on macOS, KiB on Linux
    growth_mb = (large - small) * unit / 2**20
    assert growth_mb <= MARGIN_MB, f"peak memory grew by {growth_mb:.1f} MB from 1,000 to 10,000 lines"
    for path, lines in zip(files, (1_000, 10_000)):
        outputs = Path(path + ".out").read_text(encoding="utf-8").split("\n")
        assert len(outputs) == 2 * lines + 1  # one output line per input line, then the final newline
        assert outputs[1] == outputs[-2] == ""  # whitespace-only lines give empty translations


# --- nothing lost: an output that is the input, a stopped translation, results beside a model -----

SAME_FILE_SPELLINGS = {
    "same-path": lambda path: path,
    "other-spelling": lambda path: path.parent / "." / ".." / path.parent.name / path.name,
    "symlink": lambda path: _link(path, os.symlink),
    "hardlink": lambda path: _link(path, os.link),
}


def _link(path, make):
    link = path.with_name("link-" + path.name)
    make(path, link)
    return link


@pytest.mark.parametrize("spelling", list(SAME_FILE_SPELLINGS))
def test_output_that_is_the_input_file_is_refused(saved_model_dir, tmp_path, monkeypatch, capsys, spelling):
    """`--file x --output x` used to empty x (opening it for writing) and exit 0."""
    source = tmp_path / "news.en"
    source.write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    before = source.read_bytes()
    output = SAME_FILE_SPELLINGS[spelling](source)
    code, err = run_script(monkeypatch, capsys, "translate.py", "--model", saved_model_dir, "--file", source,
                           "--output", output)
    assert_error_line(code, err, "is the input file", alone=True)
    assert source.read_bytes() == before


def _expected_translations(saved_model_dir, lines, **settings):
    from modeling_vaswani.evaluation.translation import load_translator, translate

    model, tokenizer = load_translator(str(saved_model_dir), device="cpu")
    return translate(model, tokenizer, lines, batch_size=1, **settings)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_translation_keeps_every_finished_line(saved_model_dir, english, tmp_path, signum):
    """Stopped after its first lines, translate.py leaves them in --output as whole lines, in order,
    each the translation of its input line; the message says how many."""
    source = tmp_path / "long.en"
    lines = [english[i % len(english)] for i in range(3000)]
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    output = tmp_path / "long.de"
    settings = dict(num_beams=1, max_new_tokens=40)
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "translate.py"), "--model", str(saved_model_dir), "--file", str(source),
         "--output", str(output), "--batch_size", "1", "--device", "cpu", "--num_beams", "1",
         "--max_new_tokens", "40"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        # A test run started in the background (`cmd &`) ignores SIGINT, and so would the child: Ctrl-C's
        # default is restored for it, as a terminal gives it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # Wait (without a clock in the assertions) until the first finished line is in the file, written
        # beside --output until the end.
        while process.poll() is None and not any(b"\n" in part.read_bytes() for part in tmp_path.glob(".long.de.*")):
            time.sleep(0.05)
        assert process.poll() is None, "translate.py ended before it could be stopped"
        process.send_signal(signum)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    written = output.read_text(encoding="utf-8")
    assert written.endswith("\n")  # whole lines only
    done = written.splitlines()
    assert 1 <= len(done) < len(lines)
    assert f"the translations of the first {len(done)} lines are in {output}" in err
    assert done == _expected_translations(saved_model_dir, lines[:len(done)], **settings)


def _load_script(name):
    return runpy.run_path(str(REPO / "scripts" / name))["main"]


def test_evaluation_writes_its_results_outside_the_model_folder(saved_model_dir, tmp_path, monkeypatch):
    """`evaluate_model.py --model hub_card` used to write test-beam4.* into hub_card/."""
    model = Path(shutil.copytree(saved_model_dir, tmp_path / "my-model"))
    before = sorted(os.listdir(model))
    text = tmp_path / "test.en"
    text.write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _load_script("evaluate_model.py")(["--model", str(model), "--source_file", str(text), "--reference_file",
                                       str(text), "--num_beams", "1", "--max_new_tokens", "3"])
    assert sorted(os.listdir(model)) == before
    results = tmp_path / "evaluations" / "my-model"
    assert sorted(os.listdir(results)) == ["custom-beam1.hyp.txt", "custom-beam1.scores.json"]


@pytest.mark.parametrize("where", ["the-model-folder", "inside-the-model-folder", "another-model-folder"])
def test_evaluation_refuses_to_write_into_a_model_folder(saved_model_dir, tmp_path, monkeypatch, capsys, where):
    model = Path(shutil.copytree(saved_model_dir, tmp_path / "my-model"))
    other = Path(shutil.copytree(saved_model_dir, tmp_path / "other-model"))
    before = sorted(os.listdir(model))
    output = {"the-model-folder": model, "inside-the-model-folder": model / "evaluations",
              "another-model-folder": other}[where]
    code, err = run_script(monkeypatch, capsys, "evaluate_model.py", "--model", model, "--output_dir", output)
    assert_error_line(code, err, output, "model folder", alone=True)
    assert sorted(os.listdir(model)) == before and not (model / "evaluations").exists()


@pytest.mark.parametrize("where", ["run-folder", "inside-run-folder", "shipped-folder"])
def test_collect_results_writes_translations_outside_model_folders(saved_model_dir, tmp_path, monkeypatch, capsys,
                                                                   where):
    run = Path(shutil.copytree(saved_model_dir, tmp_path / "run"))
    shipped = Path(shutil.copytree(saved_model_dir, run / "averaged"))
    output = {"run-folder": run, "inside-run-folder": run / "evaluations", "shipped-folder": shipped}[where]
    code, err = run_script(monkeypatch, capsys, "collect_results.py", "--run_dir", run, "--output_dir", output)
    assert_error_line(code, err, "model folder")
    assert not (run / "evaluations").exists()


# --- resuming training: what is unpickled, and how ----------------------------------------------

def test_resuming_unpickles_only_with_the_restricted_loader(run_dir, trained_tokenizer, make_model, english, tmp_path,
                                                            monkeypatch):
    """The Trainer still reads optimizer.pt, scheduler.pt and rng_state.pth (pickles) when resuming;
    every one goes through torch.load(weights_only=True), which builds tensors and plain containers
    only (transformers 5.24 `Trainer._load_optimizer_and_scheduler`, `_load_rng_state`)."""
    run = Path(shutil.copytree(run_dir[0], tmp_path / "run"))
    calls = []
    original = torch.load

    def recording_load(file, *args, **kwargs):
        calls.append((os.path.basename(str(file)), kwargs.get("weights_only")))
        return original(file, *args, **kwargs)

    monkeypatch.setattr(torch, "load", recording_load)
    trainer = _resuming_trainer(run, trained_tokenizer, make_model, english, max_steps=3)
    trainer.train(resume_from_checkpoint=str(run / "checkpoint-2"))
    assert {name for name, _ in calls} >= {"optimizer.pt", "scheduler.pt", "rng_state.pth"}, calls
    assert all(weights_only is True for _, weights_only in calls), calls
    assert "training_args.bin" not in {name for name, _ in calls}  # written, never read back


@pytest.mark.parametrize("victim", ["optimizer.pt", "scheduler.pt", "rng_state.pth"])
def test_a_hostile_pickle_in_a_checkpoint_does_not_run(run_dir, trained_tokenizer, make_model, english, tmp_path,
                                                       victim):
    run = Path(shutil.copytree(run_dir[0], tmp_path / "run"))
    marker = tmp_path / "payload-ran"
    # A pickle (protocol 0, written out by hand) that would create `marker` when unpickled.
    (run / "checkpoint-2" / victim).write_bytes(f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode())
    trainer = _resuming_trainer(run, trained_tokenizer, make_model, english, max_steps=3)
    with pytest.raises(ValueError, match="pickled objects"):
        trainer.train(resume_from_checkpoint=str(run / "checkpoint-2"))
    assert not marker.exists()


def _resuming_trainer(run, tokenizer, make_model, english, max_steps):
    encoded = tokenizer(english[:8], truncation=True, max_length=16)
    data = datasets.Dataset.from_dict({"input_ids": encoded["input_ids"], "labels": encoded["input_ids"]})
    args = Seq2SeqTrainingArguments(
        output_dir=str(run), max_steps=max_steps, save_steps=100, save_strategy="steps",
        per_device_train_batch_size=4, report_to="none", logging_strategy="no", eval_strategy="no", use_cpu=True,
        disable_tqdm=True,
    )
    model = make_model(vocab_size=len(tokenizer))
    return VaswaniTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                          data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))
