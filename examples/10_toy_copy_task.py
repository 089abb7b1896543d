"""Example 10 — the copy task: the first experiment to run on a new Transformer.

A model that cannot copy random digit strings ("3 1 4 1 5 9", then </s>) cannot translate: copying needs all
of §3 (cross-attention finds source position i through the positional encodings; the causal mask and right
shift keep the decoder from peeking). It trains as §5 says, by `training/paper_loop.py`, then copies held-out
strings with `generate`. The loss stops near H(q) = 0.58, the smoothed target's entropy. One CPU thread, 30–50 s.
"""

import os
import random
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerFast

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.model.label_smoothing import target_entropy
from modeling_vaswani.threads import use_threads
from modeling_vaswani.training import paper_loop

DIGITS, MIN_LENGTH, MAX_LENGTH = "0123456789", 4, 10
WARMUP_STEPS, STEPS = 100, 600  # Eq. (3); the paper's 4000 is for 100,000 steps
MAX_TOKENS = 1024  # §5.1's budget per side, scaled down: about 125 strings a batch
TRAINING_STRINGS = 76_800  # about 610 batches of MAX_TOKENS: no string is seen twice in 600 steps
AVERAGE_LAST, CHECKPOINT_EVERY = 5, 10  # §6.1's average smooths out batches of one length each (§5.1)


def digit_tokenizer() -> PreTrainedTokenizerFast:
    """One token per digit, the package's special ids (<pad> 0, <s> 1, </s> 2, <unk> 3), and </s> appended
    to every sequence as the translation tokenizer does: the decoder must learn to end the copy."""
    tokenizer = Tokenizer(models.WordLevel({"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3,
                                            **{d: 4 + i for i, d in enumerate(DIGITS)}}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def training_strings(seed: int, count: int = TRAINING_STRINGS, exclude=()) -> list[str]:
    """`count` distinct random digit strings ("3 1 4 1"), 4 to 10 digits long, none of them in `exclude`."""
    rng, strings, seen = random.Random(seed), [], set(exclude)
    while len(strings) < count:
        text = " ".join(rng.choice(DIGITS) for _ in range(rng.randint(MIN_LENGTH, MAX_LENGTH)))
        if text not in seen:
            seen.add(text)
            strings.append(text)
    return strings


def held_out_strings(count: int, train_strings: list[str], seed: int = 12345) -> list[str]:
    return training_strings(seed, count, exclude=train_strings)  # a test of copying, not of memory


def train_copy_model(seed: int = 0, steps: int = STEPS, max_tokens: int = MAX_TOKENS, d_model: int = 32,
                     warmup_steps: int = WARMUP_STEPS):
    """(model in eval mode, tokenizer, the loop's log: a dict every 10 steps): a two-layer post-LN model trained
    on `training_strings(seed)` by §5's loop, ending on §6.1's average. PyTorch's thread count is restored."""
    torch.manual_seed(seed)
    tokenizer = digit_tokenizer()
    model = VaswaniForConditionalGeneration(VaswaniConfig(
        vocab_size=len(tokenizer), d_model=d_model, d_ff=4 * d_model,  # the base model's d_ff / d_model = 2048 / 512
        num_heads=4, num_layers=2, max_position_embeddings=64, label_smoothing=0.1,  # §5.4
        dropout=0.0))  # nothing to over-fit: every training string is new
    encoded = tokenizer(training_strings(seed))
    dataset = [{"input_ids": ids, "attention_mask": mask, "labels": ids}  # the copy: labels are the input
               for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"])]
    collate = DataCollatorForSeq2Seq(tokenizer, return_tensors="pt")  # pads labels with -100 (out of the loss)
    before = torch.get_num_threads()
    use_threads(model, training=True)
    try:
        log = paper_loop.train(model, dataset, collate, max_tokens, steps, warmup_steps=warmup_steps, seed=seed,
                               average_last=AVERAGE_LAST, checkpoint_every=CHECKPOINT_EVERY)
    finally:
        torch.set_num_threads(before)
    return model.eval(), tokenizer, log


@torch.no_grad()
def generate(model, tokenizer, strings: list[str]):
    """Greedy (enough for a task with one right answer), with room for a too-long copy to show up as wrong."""
    batch = tokenizer(strings, padding=True, return_tensors="pt")
    return batch, model.generate(**batch, num_beams=1, max_new_tokens=MAX_LENGTH + 2)


def copy_strings(model, tokenizer, strings: list[str]) -> list[str]:
    return [text.strip() for text in tokenizer.batch_decode(generate(model, tokenizer, strings)[1],
                                                             skip_special_tokens=True)]


def exact_match(model, tokenizer, strings: list[str]) -> float:
    """Fraction copied exactly, on ids up to the first </s>: a copy that never stops, or stops early, is wrong."""
    batch, generated = generate(model, tokenizer, strings)
    eos = tokenizer.eos_token_id
    upto_eos = lambda ids: ids[: ids.index(eos) + 1] if eos in ids else ids  # noqa: E731
    pairs = zip(batch["input_ids"].tolist(), generated.tolist())  # generated rows start with <s>
    return sum(upto_eos(output[1:]) == upto_eos(source) for source, output in pairs) / len(strings)


def plot_training(log, config: VaswaniConfig, warmup_steps: int, path: Path) -> None:
    """The loss against the step (Eq. (3)'s rate itself: example 08), on a Figure: no pyplot, no display."""
    from matplotlib.figure import Figure

    axis = (fig := Figure(figsize=(7, 4))).subplots()
    for key, label in (("loss", "training loss H(q, p) (label-smoothed)"), ("kl_loss", "H(q, p) − H(q), as tensor2tensor logs it")):
        axis.plot([entry["step"] for entry in log], [entry[key] for entry in log], label=label)
    axis.axhline(target_entropy(config.label_smoothing, config.vocab_size), color="grey", linestyle="--",
                 label=f"floor H(q) with ε_ls = {config.label_smoothing}")
    axis.axvline(warmup_steps, color="grey", linestyle=":", label=f"end of Eq. (3)'s warm-up (step {warmup_steps})")
    axis.set(title="copy task: training loss", xlabel="step", ylabel="loss per target token")
    axis.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    began = time.monotonic()
    model, tokenizer, log = train_copy_model()
    print(f"{model.num_parameters():,} parameters, {STEPS} steps of ≤ {MAX_TOKENS} tokens a side in "
          f"{time.monotonic() - began:.0f} s; training loss H(q, p): {log[0]['loss']:.3f} → {log[-1]['loss']:.3f}")
    held_out = held_out_strings(200, training_strings(0))
    print("\nheld-out strings and their copies:\n" + "\n".join(
        f"  {source:<20} → {copy:<20} {'ok' if copy == source else 'WRONG'}"
        for source, copy in zip(held_out[:6], copy_strings(model, tokenizer, held_out[:6]))))
    print(f"\nexact match on {len(held_out)} held-out strings: {exact_match(model, tokenizer, held_out):.1%}")
    path = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent)) / "10_toy_copy_task.png"
    plot_training(log, model.config, WARMUP_STEPS, path)
    print(f"saved {path}")
