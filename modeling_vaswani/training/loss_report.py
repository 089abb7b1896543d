"""The loss on reference translations as people compare it: H(q, p) (§5.4) and −log p(y) summed over every
reference token of a set, given as `label_smoothing.comparable_losses` (means over all tokens, not of per-batch
means). `VaswaniTrainer` reads them off its evaluation's passes; `reference_losses` measures a saved model.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from ..model.label_smoothing import comparable_losses, label_smoothed_cross_entropy


class LossSums:
    """Running sums of H(q, p) and −log p(y) over reference tokens (labels ≠ -100)."""

    def __init__(self, epsilon: float, vocab_size: int):
        self.epsilon, self.vocab_size = epsilon, vocab_size
        self.smoothed = self.nll = 0.0
        self.tokens = 0

    @torch.no_grad()
    def add(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        self.smoothed += label_smoothed_cross_entropy(logits, labels, self.epsilon, reduction="sum").item()
        self.nll += label_smoothed_cross_entropy(logits, labels, 0.0, reduction="sum").item()  # ε = 0: −log p(y)
        self.tokens += int((labels != -100).sum())

    def metrics(self, prefix: str = "") -> dict[str, float]:
        if not self.tokens:
            return {}
        return comparable_losses(self.smoothed / self.tokens, self.epsilon, self.vocab_size,
                                 nll=self.nll / self.tokens, prefix=prefix)

    def sum_over_processes(self, accelerator) -> None:
        if accelerator.num_processes > 1:
            totals = torch.tensor([self.smoothed, self.nll, self.tokens], dtype=torch.float64, device=accelerator.device)
            totals = accelerator.reduce(totals, reduction="sum")
            self.smoothed, self.nll, self.tokens = totals[0].item(), totals[1].item(), int(totals[2].item())

    @contextmanager
    def watching(self, model):
        """Add every forward pass of `model` given labels (teacher forcing; generate's have none)."""

        def hook(module, args, kwargs, output):
            labels = kwargs.get("labels")
            if labels is not None and getattr(output, "logits", None) is not None:
                self.add(output.logits, labels)

        handle = model.register_forward_hook(hook, with_kwargs=True)
        try:
            yield self
        finally:
            handle.remove()


@torch.inference_mode()
def reference_losses(model, tokenizer, sources: list[str], references: list[str], batch_size: int = 64,
                     max_length: int = 256) -> dict[str, float]:
    """`comparable_losses` of `model` on the references of `sources` (teacher forcing, </s> included; pairs cut
    at `max_length` tokens as scripts/train.py cuts them), and their token count."""
    sums = LossSums(model.config.label_smoothing, model.config.vocab_size)
    model.eval()
    for start in range(0, len(sources), batch_size):
        encoded = tokenizer(sources[start:start + batch_size], text_target=references[start:start + batch_size],
                            padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)  # (B, T)
        logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                       decoder_input_ids=model.prepare_decoder_input_ids_from_labels(labels)).logits
        sums.add(logits, labels)
    if not sums.tokens:
        raise ValueError("no reference tokens to score: the references are empty.")
    return {**sums.metrics(), "reference_tokens": sums.tokens}
