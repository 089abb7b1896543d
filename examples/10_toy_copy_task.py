"""Example 10 — the copy task: the first experiment to run on a new Transformer.

A model that cannot learn to copy its input cannot translate either. The task: read a random
string of digits, write the same string back, then the end-of-sentence token:

    source  3 1 4 1 5 9 </s>
    target  3 1 4 1 5 9 </s>

It touches every part of §3 — the encoder reads the digits (§3.1), the decoder's
encoder–decoder attention (§3.2.3) must learn to look at source position i when it writes
position i, which it can only do through the positional encodings (§3.5), and the causal mask
plus the right shift (Figure 1) keep the decoder from peeking at its own answer. It is trained
exactly as §5 prescribes, by `modeling_vaswani/training/paper_loop.py`, which writes §5 out:
batches of about 1,024 tokens a side (§5.1), Adam with β = (0.9, 0.98), ε = 1e-9, the Eq. (3)
learning rate (warmup, then 1/√step decay), no gradient clipping, the label-smoothed loss of §5.4,
and at the end the average of the last 5 checkpoints (§6.1). `VaswaniTrainer` (training/trainer.py,
what scripts/train.py uses) runs the same procedure with a long run's machinery; on the same
batches both end on the same weights (tests/training/test_paper_loop.py).

What this script shows:
1. the training loss falling (drawn to 10_toy_copy_task.png, the Eq. (3) learning rate beside it);
2. a few held-out digit strings and the model's copies, decoded greedily with `generate`;
3. the exact-match accuracy on held-out strings (every digit right and the copy stops there).

Why the loss stops near 0.58 and not 0: with ε_ls = 0.1 the best the model can do is match the
smoothed target (0.9 on the right digit), whose entropy H(q) is the floor (printed and drawn below).
tensor2tensor and the Annotated Transformer log the loss less that floor, H(q, p) − H(q) (kl_loss),
which does go to 0.

Code: `modeling_vaswani/training/paper_loop.py` (`train`), `optimization.py`, `label_smoothing.py`.

    python examples/10_toy_copy_task.py          # under a minute on one CPU core

The model is small (59,072 parameters), so it trains on one CPU thread (the rule is in
`modeling_vaswani/threads.py`): more threads only wait for each other. On a busy 2-core
AMD EPYC its 600 steps took 30 to 50 s on one thread; 300 steps on two threads had not finished
after 15 minutes. OMP_NUM_THREADS=N sets another count. One thread also adds up in the same order every time, so a
rerun on the same machine ends the same way.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # draw to files; no display needed
import matplotlib.pyplot as plt
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerFast

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.model.label_smoothing import target_entropy
from modeling_vaswani.training import paper_loop
from modeling_vaswani.training.optimization import noam_lr
from modeling_vaswani.threads import choose_threads, use_threads

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))
DIGITS = "0123456789"
WARMUP_STEPS = 100  # Eq. (3); the paper's 4000 is for 100,000 steps, this task takes 600
MIN_LENGTH, MAX_LENGTH = 4, 10
STEPS = 600
MAX_TOKENS = 1024  # §5.1's budget per side, scaled down: about 125 strings a batch
TRAINING_STRINGS = 76_800  # about 610 batches of MAX_TOKENS: no string is seen twice in 600 steps
# §6.1: the model kept is the average of the last 5 checkpoints, here one every 10 steps. Batches of
# one string length each (§5.1) make the last updates jumpy; the average smooths them out.
AVERAGE_LAST, CHECKPOINT_EVERY = 5, 10


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


def copy_dataset(strings: list[str], tokenizer) -> list[dict]:
    """input_ids and labels are the same digits followed by </s>: the copy task."""
    encoded = tokenizer(strings)
    return [{"input_ids": ids, "attention_mask": mask, "labels": ids}
            for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"])]


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


def training_strings(seed: int, count: int = TRAINING_STRINGS) -> list[str]:
    """The strings `train_copy_model(seed)` trains on."""
    return random_strings(count, seed=seed)


def held_out_strings(count: int, train_strings: list[str], seed: int = 12345) -> list[str]:
    """`count` random strings that are not among `train_strings`: a test of copying, not of memory."""
    return random_strings(count, seed=seed, exclude=frozenset(train_strings))


def train_copy_model(
    seed: int = 0,
    steps: int = STEPS,
    max_tokens: int = MAX_TOKENS,
    d_model: int = 32,
    warmup_steps: int = WARMUP_STEPS,
):
    """Train on `training_strings(seed)` with §5's loop (training/paper_loop.py), ending on §6.1's average.

    Trains on the thread count of `threads.choose_threads` (1 for this model unless
    OMP_NUM_THREADS says otherwise), and leaves PyTorch's count as it found it.

    Returns (model, tokenizer, log): the trained model in eval mode, the digit tokenizer and the
    loop's log (a dict every 10 steps: "step", "loss", "kl_loss", "learning_rate").
    """
    torch.manual_seed(seed)
    tokenizer = digit_tokenizer()
    model = VaswaniForConditionalGeneration(copy_config(tokenizer, d_model=d_model))
    # Pads each batch: input_ids with <pad>, labels with -100 (left out of the loss).
    collate = DataCollatorForSeq2Seq(tokenizer, return_tensors="pt")
    before = torch.get_num_threads()
    use_threads(model, training=True)
    try:
        log = paper_loop.train(model, copy_dataset(training_strings(seed), tokenizer), collate, max_tokens, steps,
                               warmup_steps=warmup_steps, seed=seed, average_last=AVERAGE_LAST,
                               checkpoint_every=CHECKPOINT_EVERY)
    finally:
        torch.set_num_threads(before)
    model.eval()
    return model, tokenizer, log


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


def plot_training(log, config: VaswaniConfig, warmup_steps: int, path: Path) -> None:
    steps = [entry["step"] for entry in log]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot(steps, [entry["loss"] for entry in log], marker="o", markersize=3,
                 label="training loss H(q, p) (label-smoothed)")
    axes[0].plot(steps, [entry["kl_loss"] for entry in log], linewidth=1, label="H(q, p) − H(q), as tensor2tensor logs it")
    floor = target_entropy(config.label_smoothing, config.vocab_size)
    axes[0].axhline(floor, color="grey", linestyle="--", label=f"floor H(q) with ε_ls = {config.label_smoothing}")
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
    threads, why = choose_threads(VaswaniForConditionalGeneration(copy_config(digit_tokenizer())).num_parameters(),
                                  training=True)
    began = time.monotonic()
    model, tokenizer, log = train_copy_model()  # on `threads`
    config = model.config
    print(f"model: {model.num_parameters():,} parameters (d_model {config.d_model}, d_ff {config.d_ff}, "
          f"h {config.num_heads}, N {config.num_layers}), {STEPS} steps of at most {MAX_TOKENS} tokens a side "
          f"in {time.monotonic() - began:.0f} s on {threads} CPU thread{'s' * (threads > 1)} ({why})")
    first, last = log[0], log[-1]
    print(f"training loss H(q, p): {first['loss']:.3f} (step {first['step']}) → {last['loss']:.3f} (step {last['step']}); "
          f"floor H(q) with ε_ls = {config.label_smoothing}: {target_entropy(config.label_smoothing, config.vocab_size):.3f}; "
          f"H(q, p) − H(q) (kl_loss): {last['kl_loss']:.3f}")

    held_out = held_out_strings(200, training_strings(0))
    print("\nheld-out strings and their copies:")
    for source, copy in zip(held_out[:6], copy_strings(model, tokenizer, held_out[:6])):
        print(f"  {source:<20} → {copy:<20} {'ok' if copy == source else 'WRONG'}")
    accuracy = exact_match(model, tokenizer, held_out)
    print(f"\nexact match on {len(held_out)} held-out strings: {accuracy:.1%}")

    path = OUTPUT_DIR / "10_toy_copy_task.png"
    plot_training(log, config, WARMUP_STEPS, path)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
