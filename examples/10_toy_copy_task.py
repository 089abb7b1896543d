"""Example 10 — the copy task: the first experiment to run on a new Transformer.

A model that cannot learn to copy its input cannot translate either. The task: read a random
string of digits, write the same string back, then the end-of-sentence token:

    source  3 1 4 1 5 9 </s>
    target  3 1 4 1 5 9 </s>

It touches every part of §3 — the encoder reads the digits (§3.1), the decoder's
encoder–decoder attention (§3.2.3) must learn to look at source position i when it writes
position i, which it can only do through the positional encodings (§3.5), and the causal mask
plus the right shift (Figure 1) keep the decoder from peeking at its own answer. It is trained
exactly as §5 prescribes, through `VaswaniTrainer`: Adam with β = (0.9, 0.98), ε = 1e-9, the
Eq. (3) learning rate (warmup, then 1/√step decay), no gradient clipping, and the label-smoothed
loss of §5.4.

What this script shows:
1. the training loss falling (drawn to 10_toy_copy_task.png, the Eq. (3) learning rate beside it);
2. a few held-out digit strings and the model's copies, decoded greedily with `generate`;
3. the exact-match accuracy on held-out strings (every digit right and the copy stops there).

Why the loss stops near 0.58 and not 0: with ε_ls = 0.1 the best the model can do is match the
smoothed target (0.9 on the right digit), whose entropy is the floor (printed and drawn below).

Code: `modeling_vaswani/training/trainer.py` (`VaswaniTrainer`), `optimization.py`, `label_smoothing.py`.

    python examples/10_toy_copy_task.py          # about half a minute on one CPU core

The model is small (59,072 parameters), so it trains on one CPU thread (the rule is in
`modeling_vaswani/training/threads.py`): more threads only wait for each other. On a busy 2-core
AMD EPYC its 300 steps took 48 s on one thread and had not finished after 15 minutes on two.
OMP_NUM_THREADS=N sets another count. One thread also adds up in the same order every time, so a
rerun on the same machine ends the same way.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # draw to files; no display needed
import matplotlib.pyplot as plt
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerFast, PrinterCallback, Seq2SeqTrainingArguments
from transformers.utils import logging as hf_logging

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.training.optimization import noam_lr
from modeling_vaswani.training.threads import choose_threads, use_threads
from modeling_vaswani.training.trainer import VaswaniTrainer

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
DIGITS = "0123456789"
WARMUP_STEPS = 100  # Eq. (3); the paper's 4000 is for 100,000 steps, this task takes 300
MIN_LENGTH, MAX_LENGTH = 4, 10


def digit_tokenizer() -> PreTrainedTokenizerFast:
    """One token per digit, with the package's special ids (<pad> 0, <s> 1, </s> 2, <unk> 3).

    A word-level vocabulary is enough here: no BPE is needed when every "word" is a single digit.
    Like the translation tokenizer, it appends </s> to every sequence, the symbol the decoder must
    learn to emit when the copy is complete.
    """
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, **{d: 4 + i for i, d in enumerate(DIGITS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def random_strings(count: int, seed: int, exclude: frozenset = frozenset()) -> list[str]:
    """`count` distinct random digit strings ("3 1 4 1"), 4 to 10 digits long, none of them in `exclude`."""
    rng = random.Random(seed)
    strings: list[str] = []
    seen = set(exclude)
    while len(strings) < count:
        text = " ".join(rng.choice(DIGITS) for _ in range(rng.randint(MIN_LENGTH, MAX_LENGTH)))
        if text not in seen:
            seen.add(text)
            strings.append(text)
    return strings


def copy_dataset(strings: list[str], tokenizer) -> Dataset:
    """input_ids and labels are the same digits followed by </s>: the copy task."""
    encoded = tokenizer(strings)
    return Dataset.from_dict(
        {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": encoded["input_ids"]}
    )


def copy_config(tokenizer, d_model: int = 32) -> VaswaniConfig:
    """A two-layer Transformer with the paper's post-LN layout, small enough for a CPU."""
    return VaswaniConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        d_ff=4 * d_model,  # the base model's ratio d_ff / d_model = 2048 / 512
        num_heads=4,
        num_layers=2,
        dropout=0.0,  # nothing to over-fit: every training string is new
        label_smoothing=0.1,  # §5.4
        max_position_embeddings=64,
    )


def training_strings(seed: int, steps: int, batch_size: int) -> list[str]:
    """The strings `train_copy_model(seed, steps, batch_size)` trains on: each one seen once."""
    return random_strings(steps * batch_size, seed=seed)


def held_out_strings(count: int, train_strings: list[str], seed: int = 12345) -> list[str]:
    """`count` random strings that are not among `train_strings`: a test of copying, not of memory."""
    return random_strings(count, seed=seed, exclude=frozenset(train_strings))


def train_copy_model(
    seed: int = 0,
    steps: int = 300,
    batch_size: int = 128,
    d_model: int = 32,
    warmup_steps: int = WARMUP_STEPS,
    output_dir: str | os.PathLike | None = None,
):
    """Train on `steps × batch_size` fresh random strings with `VaswaniTrainer`.

    Trains on the thread count of `threads.choose_threads` (1 for this model unless
    OMP_NUM_THREADS says otherwise), and leaves PyTorch's count as it found it.

    Returns (model, tokenizer, log_history): the trained model in eval mode, the digit tokenizer
    and the Trainer's log (a list of dicts, those with "loss" every 10 steps).
    """
    torch.manual_seed(seed)
    tokenizer = digit_tokenizer()
    train_strings = training_strings(seed, steps, batch_size)
    model = VaswaniForConditionalGeneration(copy_config(tokenizer, d_model=d_model))
    before = torch.get_num_threads()
    use_threads(choose_threads(model.num_parameters())[0])
    with tempfile.TemporaryDirectory() as scratch:
        args = Seq2SeqTrainingArguments(
            output_dir=str(output_dir or scratch),
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            logging_steps=10,
            max_grad_norm=0.0,  # §5.3 clips nothing (the Trainer's default would clip at 1.0)
            save_strategy="no",
            report_to="none",
            seed=seed,
            use_cpu=True,
            disable_tqdm=True,
            dataloader_pin_memory=False,
        )
        trainer = VaswaniTrainer(
            model=model,
            args=args,
            train_dataset=copy_dataset(train_strings, tokenizer),
            # Pads each batch and builds decoder_input_ids = labels shifted right (Figure 1).
            data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
            processing_class=tokenizer,
            warmup_steps=warmup_steps,  # Eq. (3)
        )
        trainer.remove_callback(PrinterCallback)  # the loss curve is drawn instead of printed
        try:
            trainer.train()
        finally:
            use_threads(before)
    model.eval()
    return model, tokenizer, trainer.state.log_history


@torch.no_grad()
def copy_strings(model, tokenizer, strings: list[str]) -> list[str]:
    """Greedy `generate` on each string; returns the decoded copies (digits separated by spaces)."""
    batch = tokenizer(strings, padding=True, return_tensors="pt")
    generated = model.generate(
        **batch,
        num_beams=1,  # greedy: enough for a task with one right answer
        max_new_tokens=MAX_LENGTH + 2,  # room for a too-long copy to show up as wrong
    )
    return [text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True)]


@torch.no_grad()
def exact_match(model, tokenizer, strings: list[str]) -> float:
    """Fraction of strings copied exactly: every digit, in order, and nothing after them.

    The comparison is on token ids up to the first </s>, so a copy that never stops, or stops
    one digit early, counts as wrong.
    """
    batch = tokenizer(strings, padding=True, return_tensors="pt")
    generated = model.generate(**batch, num_beams=1, max_new_tokens=MAX_LENGTH + 2)
    correct = 0
    for source, output in zip(batch["input_ids"].tolist(), generated.tolist()):
        target = source[: source.index(tokenizer.eos_token_id) + 1]  # digits + </s>
        produced = output[1:]  # drop the decoder start token <s>
        if tokenizer.eos_token_id in produced:
            produced = produced[: produced.index(tokenizer.eos_token_id) + 1]
        correct += produced == target
    return correct / len(strings)


def smoothed_entropy(epsilon: float, vocab_size: int) -> float:
    """The lowest loss §5.4 allows: the entropy of q = (1 − ε on the gold token, ε/(V − 1) on each other)."""
    return -(1 - epsilon) * math.log(1 - epsilon) - epsilon * math.log(epsilon / (vocab_size - 1))


def plot_training(log_history, config: VaswaniConfig, warmup_steps: int, path: Path) -> None:
    losses = [(entry["step"], entry["loss"]) for entry in log_history if "loss" in entry]
    steps, values = zip(*losses)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot(steps, values, marker="o", markersize=3, label="training loss (label-smoothed)")
    floor = smoothed_entropy(config.label_smoothing, config.vocab_size)
    axes[0].axhline(floor, color="grey", linestyle="--", label=f"floor with ε_ls = {config.label_smoothing}")
    axes[0].set(title="copy task: training loss", xlabel="step", ylabel="loss per target token")
    axes[0].legend()
    rates = [noam_lr(step, config.d_model, warmup_steps) for step in range(1, steps[-1] + 1)]
    axes[1].plot(range(1, steps[-1] + 1), rates)
    axes[1].set(title=f"Eq. (3) learning rate (d_model {config.d_model}, warmup {warmup_steps})",
                xlabel="step", ylabel="learning rate")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    hf_logging.set_verbosity_error()
    seed, steps, batch_size = 0, 300, 128
    threads, why = choose_threads(VaswaniForConditionalGeneration(copy_config(digit_tokenizer())).num_parameters())
    began = time.monotonic()
    model, tokenizer, log_history = train_copy_model(seed=seed, steps=steps, batch_size=batch_size)  # on `threads`
    config = model.config
    print(f"model: {model.num_parameters():,} parameters (d_model {config.d_model}, d_ff {config.d_ff}, "
          f"h {config.num_heads}, N {config.num_layers}), {steps} steps of {batch_size} strings "
          f"in {time.monotonic() - began:.0f} s on {threads} CPU thread{'s' * (threads > 1)} ({why})")
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    print(f"training loss: {losses[0]:.3f} (step 10) → {losses[-1]:.3f} (step {steps}); "
          f"floor with ε_ls = {config.label_smoothing}: {smoothed_entropy(config.label_smoothing, config.vocab_size):.3f}")

    held_out = held_out_strings(200, training_strings(seed, steps, batch_size))
    print("\nheld-out strings and their copies:")
    for source, copy in zip(held_out[:6], copy_strings(model, tokenizer, held_out[:6])):
        print(f"  {source:<20} → {copy:<20} {'ok' if copy == source else 'WRONG'}")
    accuracy = exact_match(model, tokenizer, held_out)
    print(f"\nexact match on {len(held_out)} held-out strings: {accuracy:.1%}")

    path = OUTPUT_DIR / "10_toy_copy_task.png"
    plot_training(log_history, config, WARMUP_STEPS, path)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
