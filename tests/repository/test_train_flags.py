"""scripts/train.py's command line: --help without torch, refused flags, the Trainer's settings, earlier runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from checks import assert_error_line
from modeling_vaswani.machine import cpp_compiler
from modeling_vaswani.model.configuration_vaswani import PRESETS
from modeling_vaswani.training.recipe.arguments import parse_args
from modeling_vaswani.training.recipe.run import build_model, check_resumed_model
from modeling_vaswani.training.run_folder import LOCK_NAME, FolderInUseError, claim_output_dir

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "scripts" / "train.py"


def recipe(*argv):
    return parse_args(list(map(str, argv)))[0]


def test_help_leads_with_the_paper_and_loads_no_torch():
    # As `python scripts/train.py --help` runs it: scripts/ first on sys.path.
    probe = (f"import runpy, sys\nsys.path.insert(0, {str(TRAIN.parent)!r})\nsys.argv = [{str(TRAIN)!r}, '--help']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
             "except SystemExit as stop:\n    assert stop.code == 0\n"
             "print('LOADED', sorted(m for m in ('torch', 'datasets') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    text, loaded = result.stdout.rsplit("LOADED", 1)
    assert loaded.strip() == "[]"
    lines = text.splitlines()
    assert lines[2].startswith("Train a Transformer the way §5") and len(lines) < 200
    groups = ("the model (§3, Table 3)", "training (§5)", "checkpoints, evaluation and logs (§6.1)", "data (§5.1)")
    assert [text.index(group) for group in groups] == sorted(text.index(group) for group in groups)
    compact = " ".join(text.split())
    for shown in ("--max_tokens N §5.1: padded source (and target) tokens per optimizer step",
                  "0 = no clipping, as in the paper", "(default: 4096)", "(default: epoch)",
                  "--save_every_minutes MIN", "Refused, because this script sets what they would",
                  "--learning_rate, --lr_scheduler_type"):
        assert shown in compact, shown
    assert "--learning_rate LEARNING_RATE" not in text and "5e-05" not in text and "--max-tokens" not in text


# One case per check (each check loops over the flags it covers).
@pytest.mark.parametrize("args,names", [
    (["--generation_num_beams", "0"], ["--generation_num_beams", "0"]),
    (["--max_train_minutes", "-1"], ["--max_train_minutes", "-1"]),
    (["--max_train_minutes", "inf"], ["--max_train_minutes", "inf"]),
    (["--dropout", "1.5"], ["--dropout", "1.5"]),
    (["--max_tokens", "-5"], ["--max_tokens", "-5"]),
    (["--learning_rate", "1e-3"], ["--learning_rate", "Eq. (3)", "--noam_scale"]),
    (["--learning-rate", "1e-3"], ["--learning-rate", "Eq. (3)"]),
    (["--warmup_steps", "100"], ["--warmup_steps", "--warmup_steps_noam"]),
    (["--label_smoothing_factor", "0.1"], ["--label_smoothing_factor", "--label_smoothing"]),
    (["--eval_steps", "5"], ["--eval_steps", "--eval_strategy steps"]),
    (["--average_last", "1"], ["--average_last 1"]),
    (["--average_last", "5", "--save_total_limit", "2"], ["--average_last 5", "--save_total_limit"]),
    (["--average_last", "3", "--save_strategy", "no"], ["--average_last 3", "--save_every_minutes"]),
    (["--train_source", "a.en"], ["--train_source", "--train_target"]),
    (["--target_lang", "en"], ["--source_lang", "--target_lang"]),
    (["--preset", "huge"], ["--preset", "huge"]),
    (["--streaming"], ["--streaming needs --max_steps"]),
    (["--streaming", "--max_steps", "5", "--max_tokens", "0"], ["--max_tokens N, not 0"]),
    (["--train_file", "a.jsonl", "--train_source", "a.en", "--train_target", "a.de"], ["--train_file", "not both"]),
    (["--dataset_name", "wmt14", "--train_file", "a.jsonl"], ["--dataset_name", "give one"]),
    (["--model_name_or_path", "{tmp}", "--d_model", "64"], ["--d_model", "keeps its own sizes"]),
    (["--no_such_flag", "3"], ["--no_such_flag", "--help_all"]),
    (["--per_device_train_batch_size", "8"], ["--per_device_train_batch_size", "--max_tokens 0"]),
])
def test_a_value_that_cannot_run_is_refused_before_any_work(capsys, tmp_path, args, names):
    with pytest.raises(SystemExit) as stop:
        parse_args([arg.format(tmp=tmp_path) for arg in args])
    assert_error_line(stop.value.code, capsys.readouterr().err, *names, alone=True)


def test_the_recipe_defaults_and_what_still_applies(tmp_path):
    fine_tuning = recipe("--model_name_or_path", tmp_path, "--dropout", "0.2")
    assert fine_tuning.dropout == 0.2  # regularisation still applies (a missing model: test_command_lines.py)
    streaming = recipe("--train_file", "a.jsonl", "b.jsonl", "--streaming", "--max_steps", "5")
    assert streaming.train_file == ["a.jsonl", "b.jsonl"] and streaming.streaming and streaming.shuffle_buffer == 10000
    assert recipe("--shuffle_buffer", "500").shuffle_buffer == 500 and recipe().overwrite_output_dir is False


def test_share_embeddings_false_gives_the_encoder_a_matrix_of_its_own(trained_tokenizer):
    shared = build_model(recipe("--preset", "tiny"), trained_tokenizer).model
    assert shared.encoder.embed_tokens.weight is shared.decoder.embed_tokens.weight
    own = build_model(recipe("--preset", "tiny", "--share_embeddings", "false"), trained_tokenizer)
    assert own.config.share_embeddings is False and own.config.tie_word_embeddings is True
    assert own.model.encoder.embed_tokens.weight is not own.model.decoder.embed_tokens.weight
    assert own.get_output_embeddings().weight is own.model.decoder.embed_tokens.weight  # still tied, §3.4


def test_a_resumed_run_keeps_its_checkpoints_model(tmp_path):
    checkpoint = tmp_path / "checkpoint-10"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({**PRESETS["tiny"], "vocab_size": 500}))
    resume = ["--resume_from_checkpoint", checkpoint]
    check_resumed_model(recipe(*resume), checkpoint)  # no size flags: the checkpoint's model
    check_resumed_model(recipe(*resume, "--preset", "tiny", "--vocab_size", "500", "--d_model", "32"), checkpoint)
    for flags, said in ((["--d_model", "64"], "--d_model 64 asks for d_model=64"),
                        (["--preset", "small"], "--preset small asks for d_model=256")):
        with pytest.raises(ValueError) as refused:
            check_resumed_model(recipe(*resume, *flags), checkpoint)
        assert said in str(refused.value) and "has 32" in str(refused.value)


def test_the_trainer_gets_the_papers_settings_and_the_machines():
    _, args = parse_args(["--output_dir", "somewhere"])
    assert args.max_grad_norm == 0.0  # §5.3: no clipping (the Trainer's own default is 1.0)
    assert args.use_cpu is not torch.accelerator.is_available() and (args.dataloader_pin_memory is not args.use_cpu)
    assert (args.save_strategy, args.eval_strategy, args.logging_steps, args.logging_first_step) == \
        ("epoch", "epoch", 50, True)
    assert args.predict_with_generate and args.generation_num_beams == 1 and args.max_steps == -1
    _, timed = parse_args(["--save_every_minutes", "10", "--max_grad_norm", "1"])
    assert timed.save_strategy == "no" and timed.max_grad_norm == 1.0  # time-based checkpoints instead of epochs
    assert parse_args(["--save_every_minutes", "10", "--save_strategy", "epoch"])[1].save_strategy == "epoch"
    # Each layer compiled on a CPU where inductor finds a C++ compiler; --torch_compile false runs eagerly.
    assert args.torch_compile is (args.use_cpu and cpp_compiler() is not None)
    assert parse_args(["--torch_compile", "false"])[1].torch_compile is False
    _, passed = parse_args(["--gradient_accumulation_steps", "2", "--bf16", "false"])
    assert passed.gradient_accumulation_steps == 2  # every other Trainer flag goes through
    assert parse_args(["--max_tokens", "0", "--per_device_train_batch_size", "8"])[1].per_device_train_batch_size == 8


def test_an_earlier_run_is_refused_unless_replacing_or_resuming_it_is_asked_for(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoint-40").mkdir(parents=True)
    (run / "checkpoint-40" / "trainer_state.json").write_text("{}")
    (run / "model.safetensors").write_text("x")
    with pytest.raises(ValueError) as refused:
        claim_output_dir(recipe("--output_dir", run))
    message = str(refused.value)
    assert message.startswith(f"--output_dir {run} holds an earlier run (1 checkpoint, model.safetensors)")
    assert "--overwrite_output_dir" in message and f"--resume_from_checkpoint {run / 'checkpoint-40'}" in message
    assert not (run / LOCK_NAME).exists() and (run / "model.safetensors").exists()

    lock = claim_output_dir(recipe("--output_dir", run, "--resume_from_checkpoint", run / "checkpoint-40"))
    with pytest.raises(FolderInUseError):  # a second run at the same time, whatever it asks for
        claim_output_dir(recipe("--output_dir", run, "--overwrite_output_dir"))
    assert (run / LOCK_NAME).exists() and (run / "checkpoint-40").exists()
    lock.release()
    claim_output_dir(recipe("--output_dir", run, "--overwrite_output_dir")).release()
    assert list(run.iterdir()) == []

