"""VaswaniTrainer on a streamed (iterable) training set with a §5.1 token budget (its batches beside a dataset's:
test_trainer.py)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from datasets import Dataset

from modeling_vaswani.training.batching import TokenBudgetStream
from tiny_data import rows

N_EXAMPLES = 90


def _stream(shards=3):
    """Sources of 2–24 tokens, and a column the model ignores."""
    examples = [{**row, "source_text": f"pair {i}"} for i, row in enumerate(rows(N_EXAMPLES, longest=24))]
    return Dataset.from_list(examples).to_iterable_dataset(num_shards=shards)


@pytest.fixture
def stream_trainer(build_trainer):
    return lambda max_tokens=120, **kwargs: build_trainer(dataset=_stream(), max_tokens=max_tokens, **kwargs)


def test_training_on_a_stream_reads_it_again_and_a_resumed_run_ends_with_the_same_weights(stream_trainer, tmp_path):
    """7 steps on a stream of 4 batches: a second epoch, as max_steps asks. Resumed at step 3, the Trainer skips
    the batches already trained on; they are the same batches, so the run goes on exactly."""
    settings = dict(max_steps=7, logging_steps=1, max_tokens=600, shuffle_buffer=45, save_strategy="steps",
                    save_steps=3)
    whole = stream_trainer(**settings)
    assert len(list(whole.get_train_dataloader())) == 4
    before = {name: p.detach().clone() for name, p in whole.model.named_parameters()}
    result = whole.train()
    assert whole.state.global_step == 7 and np.isfinite(result.training_loss) and whole.state.epoch > 1
    assert all(not torch.equal(before[name], p) for name, p in whole.model.named_parameters())
    assert len([entry for entry in whole.state.log_history if "loss" in entry]) == 7
    resumed = stream_trainer(**settings)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert resumed.state.global_step == 7
    for (name, expected), got in zip(whole.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(expected, got), name


# Under torchrun ------------------------------------------------------------------------------------

DDP_WORKER = '''
import hashlib, json, sys
import torch
from datasets import Dataset
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.trainer import VaswaniTrainer

rows_file, tokenizer_dir, output, max_steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = json.loads(open(rows_file).read())
tokenizer = load_tokenizer(tokenizer_dir)
torch.manual_seed(0)
model = VaswaniForConditionalGeneration(VaswaniConfig(
    vocab_size=len(tokenizer), d_model=16, d_ff=32, num_heads=2, num_layers=1, dropout=0.0,
    pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    decoder_start_token_id=tokenizer.bos_token_id))
collate, seen = DataCollatorForSeq2Seq(tokenizer, model=model), []

def recording(features):
    batch = collate(features)
    seen.append(batch["input_ids"][:, 0].tolist())
    return batch

args = Seq2SeqTrainingArguments(output_dir=output, max_steps=max_steps, use_cpu=True, report_to="none",
                                save_strategy="no", disable_tqdm=True, dataloader_pin_memory=False, seed=0,
                                ddp_find_unused_parameters=False)
trainer = VaswaniTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows).to_iterable_dataset(num_shards=2),
                         data_collator=recording, max_tokens=240, shuffle_buffer=40, warmup_steps=4)
trainer.train()
weights = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy().tobytes()
with open(f"{output}/rank{trainer.args.process_index}.json", "w") as f:
    json.dump({"world_size": trainer.args.world_size, "steps": trainer.state.global_step, "seen": seen,
               "weights": hashlib.sha256(weights).hexdigest()}, f)
trainer.accelerator.end_training()  # destroys the process group: Gloo's threads would abort the exit
'''


@pytest.mark.slow
def test_torchrun_processes_train_on_their_own_share_of_the_stream(tmp_path, saved_model_dir, repo_root):
    """Two processes: each trains on exactly its TokenBudgetStream share (not re-split, not dispatched by
    accelerate), within half the step's budget, for as many steps, into the same weights."""
    rows = [{key: value for key, value in row.items() if key != "source_text"} for row in _stream(shards=1)]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "worker.py").write_text(DDP_WORKER)
    shares = [TokenBudgetStream(rows, 120, buffer_size=40, seed=0, num_replicas=2, rank=r) for r in (0, 1)]
    per_epoch = len(list(shares[0]))
    steps = per_epoch + 2  # into the second reading of the stream
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(tmp_path / "worker.py"), str(tmp_path / "rows.json"), str(saved_model_dir), str(tmp_path), str(steps)]
    result = subprocess.run(command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2] and [r["steps"] for r in ranks] == [steps, steps]
    assert ranks[0]["weights"] == ranks[1]["weights"]  # gradients were averaged over both
    for rank, (share, record) in enumerate(zip(shares, ranks)):
        expected = [[row["input_ids"][0] for row in batch] for batch in share]
        share.set_epoch(1)
        expected += [[row["input_ids"][0] for row in batch] for batch in share][:2]
        assert record["seen"][:steps] == expected, rank
    first_epoch = [set(sum(record["seen"][:per_epoch], [])) for record in ranks]
    assert first_epoch[0] | first_epoch[1] == {row["input_ids"][0] for row in rows}
