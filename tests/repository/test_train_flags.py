"""scripts/train.py's command line, in this process: every flag is checked before any work starts.

--help answers without loading torch; a value that could not run as asked (a beam of 0, a budget
of -1 minutes, sizes for a model that already has them, a Trainer flag this script sets itself)
ends in one `error: ...` line naming the flag; the Trainer gets the paper's settings (no gradient
clipping) and the machine's (CPU); an output folder holding an earlier run is refused unless
--overwrite_output_dir or --resume_from_checkpoint says what is meant, and is locked while a run
uses it. plot_training_curve.py, given a run that logged no loss, says how to log it.
"""

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "scripts" / "train.py"


@pytest.fixture(scope="module")
def script():
    """train.py's functions, as `import` would give them (its main() does not run)."""
    return runpy.run_path(str(TRAIN), run_name="train_under_test")


def error_line(capsys, call):
    """The one stderr line of a call that must end the program with exit status 2."""
    with pytest.raises(SystemExit) as stop:
        call()
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_help_leads_with_the_paper_and_loads_no_torch():
    # As `python scripts/train.py --help` runs it: scripts/ first on sys.path.
    probe = ("import runpy, sys\n"
             f"sys.path.insert(0, {str(TRAIN.parent)!r})\n"
             f"sys.argv = [{str(TRAIN)!r}, '--help']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
             "except SystemExit as stop:\n    assert stop.code == 0\n"
             "print('LOADED', sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    text, loaded = result.stdout.rsplit("LOADED", 1)
    assert loaded.strip() == "[]"
    lines = text.splitlines()
    assert lines[2].startswith("Train a Transformer the way §5") and len(lines) < 200
    assert text.index("the model (§3, Table 3)") < text.index("training (§5)") < text.index("data (§5.1)")
    compact = " ".join(text.split())
    for shown in ("--max_tokens N §5.1: padded source (and target) tokens per optimizer step",
                  "0 = no clipping, as in the paper", "(default: 4096)", "(default: epoch)",
                  "--save_every_minutes MIN", "Refused, because this script sets what they would: --learning_rate"):
        assert shown in compact, shown
    assert "--learning_rate LEARNING_RATE" not in text and "5e-05" not in text


@pytest.mark.parametrize("args,names", [
    (["--generation_num_beams", "0"], ["--generation_num_beams", "0"]),
    (["--max_train_minutes", "0"], ["--max_train_minutes"]),
    (["--max_train_minutes", "-1"], ["--max_train_minutes", "-1"]),
    (["--num_train_epochs", "0"], ["--num_train_epochs"]),
    (["--max_steps", "0"], ["--max_steps"]),
    (["--save_every_minutes", "0"], ["--save_every_minutes"]),
    (["--threads", "0"], ["--threads"]),
    (["--dropout", "1.5"], ["--dropout", "1.5"]),
    (["--max_tokens", "-5"], ["--max_tokens"]),
    (["--learning_rate", "1e-3"], ["--learning_rate", "Eq. (3)", "--noam_scale"]),
    (["--warmup_steps", "100"], ["--warmup_steps", "--warmup_steps_noam"]),
    (["--lr_scheduler_type", "linear"], ["--lr_scheduler_type", "Eq. (3)"]),
    (["--label_smoothing_factor", "0.1"], ["--label_smoothing_factor", "--label_smoothing"]),
    (["--adam_beta2", "0.999"], ["--adam_beta2", "§5.3"]),
    (["--eval_steps", "5"], ["--eval_steps", "--eval_strategy steps"]),
    (["--save_steps", "5"], ["--save_steps", "--save_strategy steps"]),
    (["--average_last", "1"], ["--average_last 1"]),
    (["--average_last", "5", "--save_total_limit", "2"], ["--average_last 5", "--save_total_limit"]),
    (["--average_last", "3", "--save_strategy", "no"], ["--average_last 3", "--save_every_minutes"]),
    (["--train_source", "a.en"], ["--train_source", "--train_target"]),
    (["--target_lang", "en"], ["--source_lang", "--target_lang"]),
    (["--preset", "huge"], ["--preset", "huge"]),
])
def test_a_value_that_cannot_run_is_refused_before_any_work(script, capsys, args, names):
    line = error_line(capsys, lambda: script["parse_options"](args))
    for name in names:
        assert name in line, (name, line)


def test_a_trained_model_keeps_its_sizes(script, capsys, tmp_path):
    for flag, value in (("--d_model", "64"), ("--preset", "base"), ("--vocab_size", "300")):
        line = error_line(capsys, lambda: script["parse_options"](["--model_name_or_path", str(tmp_path), flag, value]))
        assert flag in line and "keeps its own sizes" in line
    options = script["parse_options"](["--model_name_or_path", str(tmp_path), "--dropout", "0.2"])
    assert options.dropout == 0.2  # regularisation still applies when fine-tuning
    with pytest.raises(FileNotFoundError, match="--model_name_or_path .*no-such-model: no such model folder"):
        script["parse_options"](["--model_name_or_path", str(tmp_path / "no-such-model")])


def test_a_resumed_run_keeps_its_checkpoints_model(script, tmp_path):
    from modeling_vaswani.model.configuration_vaswani import PRESETS

    checkpoint = tmp_path / "checkpoint-10"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({**PRESETS["tiny"], "vocab_size": 500}))
    check = script["check_resumed_model"]
    parse = script["parse_options"]
    resume = ["--resume_from_checkpoint", str(checkpoint)]
    check(parse(resume), checkpoint)  # no size flags: the checkpoint's model
    check(parse([*resume, "--preset", "tiny", "--vocab_size", "500", "--d_model", "32"]), checkpoint)  # the same
    with pytest.raises(ValueError, match=r"--d_model 64 asks for d_model=64 but the checkpoint .* has 32"):
        check(parse([*resume, "--d_model", "64"]), checkpoint)
    with pytest.raises(ValueError, match=r"--preset small asks for d_model=256"):
        check(parse([*resume, "--preset", "small"]), checkpoint)


def test_the_trainer_gets_the_papers_settings_and_the_machines(script, capsys):
    args = script["trainer_arguments"](script["parse_options"](["--output_dir", "somewhere"]))
    assert args.max_grad_norm == 0.0  # §5.3: no clipping (the Trainer's own default is 1.0)
    assert args.use_cpu is not torch.accelerator.is_available() and (args.dataloader_pin_memory is not args.use_cpu)
    assert (args.save_strategy, args.eval_strategy, args.logging_steps, args.logging_first_step) == \
        ("epoch", "epoch", 50, True)
    assert args.predict_with_generate and args.generation_num_beams == 1
    timed = script["trainer_arguments"](script["parse_options"](["--save_every_minutes", "10", "--max_grad_norm", "1"]))
    assert timed.save_strategy == "no" and timed.max_grad_norm == 1.0  # time-based checkpoints instead of epochs
    both = script["trainer_arguments"](script["parse_options"](["--save_every_minutes", "10", "--save_strategy", "epoch"]))
    assert both.save_strategy == "epoch"
    passed = script["trainer_arguments"](script["parse_options"](["--gradient_accumulation_steps", "2", "--bf16", "false"]))
    assert passed.gradient_accumulation_steps == 2  # every other Trainer flag goes through

    line = error_line(capsys, lambda: script["trainer_arguments"](script["parse_options"](["--no_such_flag", "3"])))
    assert "--no_such_flag" in line
    line = error_line(capsys, lambda: script["trainer_arguments"](
        script["parse_options"](["--per_device_train_batch_size", "8"])))
    assert "--per_device_train_batch_size" in line and "--max_tokens 0" in line
    fixed = script["trainer_arguments"](script["parse_options"](["--max_tokens", "0", "--per_device_train_batch_size", "8"]))
    assert fixed.per_device_train_batch_size == 8


def test_an_earlier_run_is_refused_unless_replacing_or_resuming_it_is_asked_for(script, tmp_path):
    from modeling_vaswani.training.run_folder import LOCK_NAME, FolderInUseError

    run = tmp_path / "run"
    (run / "checkpoint-40").mkdir(parents=True)
    (run / "checkpoint-40" / "trainer_state.json").write_text("{}")
    (run / "model.safetensors").write_text("x")
    parse, claim = script["parse_options"], script["claim_output_dir"]
    with pytest.raises(ValueError) as refused:
        claim(parse(["--output_dir", str(run)]))
    message = str(refused.value)
    assert message.startswith(f"--output_dir {run} holds an earlier run (1 checkpoint, model.safetensors)")
    assert "--overwrite_output_dir" in message and f"--resume_from_checkpoint {run / 'checkpoint-40'}" in message
    assert not (run / LOCK_NAME).exists() and (run / "model.safetensors").exists()

    lock = claim(parse(["--output_dir", str(run), "--resume_from_checkpoint", str(run / "checkpoint-40")]))
    try:
        assert (run / LOCK_NAME).exists() and (run / "checkpoint-40").exists()
        # A second run in the same folder at the same time is refused, whatever it asks for.
        with pytest.raises(FolderInUseError, match=rf"--output_dir {run} is in use by another training run"):
            claim(parse(["--output_dir", str(run), "--overwrite_output_dir"]))
    finally:
        lock.release()

    claim(parse(["--output_dir", str(run), "--overwrite_output_dir"])).release()
    assert sorted(p.name for p in run.iterdir()) == []


def test_a_curve_of_a_run_that_logged_no_loss_says_how_to_log_it(tmp_path):
    plot = runpy.run_path(str(REPO / "scripts" / "plot_training_curve.py"), run_name="plot_under_test")
    (tmp_path / "trainer_state.json").write_text(json.dumps(
        {"global_step": 27, "logging_steps": 50, "log_history": [{"step": 27, "eval_bleu": 1.0}]}))
    with pytest.raises(ValueError, match=r"logs no training loss \(the run took 27 steps and logged the loss every "
                                         r"50\); train with --logging_steps N, N at most 27"):
        plot["main"](["--run_dir", str(tmp_path), "--output", str(tmp_path / "curve.png")])
