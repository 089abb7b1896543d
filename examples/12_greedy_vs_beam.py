"""Example 12 — §6.1 decoding: greedy search against beam search (beam 4, length penalty α = 0.6).

A few validation sentences decoded both ways, scored log P(Y | X) / |Y|^α (Hugging Face's lp); then --scan
sentences with GNMT's ((5 + |Y|) / 6)^α [38], the paper's, against |Y|^α, and the first they decode differently.
"""

import torch

from common import plt, run, save, trained_model, validation_lines
from modeling_vaswani.model.beam_search import gnmt_length_penalty
from modeling_vaswani.model.generation import PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH

NUM_BEAMS, ALPHA = 4, 0.6  # §6.1
PENALTIES = {"gnmt": gnmt_length_penalty, "hf": lambda length, alpha: length ** alpha}  # Hugging Face's: |Y|^α
SEARCHES = {"gnmt": PAPER_SEARCH, "hf": TRANSFORMERS_BEAM_SEARCH}  # the search that ranks by each


def decode(model, tokenizer, sources, num_beams, **search):
    """Texts, log P(Y | X) and |Y| (generated tokens up to and including </s>), and generate's own output."""
    out = model.generate(**tokenizer(sources, return_tensors="pt", padding=True), num_beams=num_beams, do_sample=False,
                         output_scores=True, return_dict_in_generate=True, **search)
    if num_beams == 1:  # out.scores: one (B, V) tensor per step; normalize_logits makes them log-probabilities
        log_probs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        real = out.sequences[:, 1:] != tokenizer.pad_token_id  # after the start token, up to </s> (then padding)
    else:
        log_probs = model.compute_transition_scores(out.sequences, out.scores, out.beam_indices)
        real = out.beam_indices[:, : log_probs.shape[1]] >= 0  # -1 marks steps after the hypothesis ended
    return tokenizer.batch_decode(out.sequences, skip_special_tokens=True), (log_probs * real).sum(-1), real.sum(-1), out


@torch.no_grad()
def main():
    args, model, tokenizer = trained_model(__doc__, {
        "count": (5, "how many validation sentences"), "scan": (100, "sentences decoded with each length penalty"),
        "source_lang": ("en", "the model's source language"), "target_lang": ("de", "the model's target language")})
    if args.count < 1:
        raise ValueError(f"--count must be at least 1, got {args.count}")
    sources, references = (validation_lines(lang)[: args.count] for lang in (args.source_lang, args.target_lang))
    greedy_texts, greedy_logp, greedy_len, _ = decode(model, tokenizer, sources, 1)
    beam_texts, beam_logp, beam_len, out = decode(model, tokenizer, sources, NUM_BEAMS, length_penalty=ALPHA,
                                                  **TRANSFORMERS_BEAM_SEARCH)
    greedy_scores, beam_scores = greedy_logp / greedy_len.float() ** ALPHA, out.sequences_scores  # what beams rank by
    assert torch.allclose(beam_scores, beam_logp / beam_len.float() ** ALPHA, atol=1e-4), (beam_scores, beam_logp)
    print(f"score = log P(Y|X) / |Y|^{ALPHA}; higher is better. Beam size {NUM_BEAMS}.\n")
    for i, source in enumerate(sources):
        print(f"[{i}] source:    {source}\n    reference: {references[i]}")
        for name, text, logp, length, score in (("greedy", greedy_texts, greedy_logp, greedy_len, greedy_scores),
                                                (f"beam {NUM_BEAMS}", beam_texts, beam_logp, beam_len, beam_scores)):
            print(f"    {name + ':':<10} {text[i].strip():<60}  log P {logp[i]:7.3f}  |Y| {int(length[i]):2d}  "
                  f"score {score[i]:7.3f}")
    better = int((beam_scores >= greedy_scores - 1e-4).sum())  # two code paths: float rounding, as above
    print(f"\nbeam score ≥ greedy score for {better} of {len(sources)} sentences.")

    # The paper's search (GNMT's penalty) against Hugging Face's (|Y|^α) on the first --scan sentences.
    scan, eos = validation_lines(args.source_lang)[: args.scan], tokenizer.eos_token_id
    results = {name: ([], [], []) for name in PENALTIES}  # texts, scores, |Y| (up to and including the first </s>)
    for name, (texts, scores, lengths) in results.items():
        for at in range(0, len(scan), 32):
            out = model.generate(**tokenizer(scan[at:at + 32], return_tensors="pt", padding=True), num_beams=NUM_BEAMS,
                                 length_penalty=ALPHA, output_scores=True, return_dict_in_generate=True, **SEARCHES[name])
            texts += [text.strip() for text in tokenizer.batch_decode(out.sequences, skip_special_tokens=True)]
            scores += out.sequences_scores.tolist()
            lengths += [ids.index(eos) + 1 if eos in ids else len(ids) for ids in out.sequences[:, 1:].tolist()]
    differ = [i for i in range(len(scan)) if results["gnmt"][0][i] != results["hf"][0][i]]
    print(f"\nbeam {NUM_BEAMS}: the paper's search (GNMT's length penalty) and Hugging Face's (|Y|^α) choose "
          f"different translations for {len(differ)} of {len(scan)} validation sentences.")
    lengths_shown = []
    if differ:
        print(f"[val #{differ[0]}] source: {scan[differ[0]]}")
        for name in PENALTIES:
            text, score, length = (column[differ[0]] for column in results[name])
            log_p = score * PENALTIES[name](length, ALPHA)  # the search's score is log P / lp(Y)
            under = "   ".join(f"{other}: {log_p / PENALTIES[other](length, ALPHA):7.3f}" for other in PENALTIES)
            print(f"    chosen with {name:<4}: {text:<60}  log P {log_p:7.3f}  |Y| {length:2d}  score {under}")
            lengths_shown.append(length)
        print("    Each formula scores both translations; dividing by |Y|^α favours the longer one more.")

    fig, (axis, right) = plt.subplots(1, 2, figsize=(1.4 * len(sources) + 9, 4),
                                      gridspec_kw={"width_ratios": [1.4 * len(sources) + 3, 6]})
    positions = range(len(sources))
    axis.bar([p - 0.2 for p in positions], greedy_scores.numpy(), width=0.4, label="greedy")
    axis.bar([p + 0.2 for p in positions], beam_scores.numpy(), width=0.4, label=f"beam {NUM_BEAMS}, α = {ALPHA}")
    axis.set_xticks(list(positions), [f"val #{i}" for i in positions])
    axis.set(ylabel=f"log P(Y|X) / |Y|^{ALPHA}  (higher is better)", title="Greedy vs beam search on Multi30k sentences")
    axis.axhline(0, color="black", lw=0.8)
    axis.legend(loc="lower right")  # the bars grow downwards from 0
    for name, label in (("gnmt", "GNMT (paper): ((5 + |Y|) / 6)^α"), ("hf", "Hugging Face: |Y|^α")):
        right.plot(range(1, 41), [PENALTIES[name](n, ALPHA) for n in range(1, 41)], label=label)
    for n in lengths_shown:
        right.axvline(n, color="grey", lw=0.8, ls=":")
    right.set(xlabel="|Y| (generated tokens, </s> included)", ylabel=f"lp(Y), α = {ALPHA}",
              title=f"Length penalties ({len(differ)} of {args.scan} sentences decode differently)")
    right.legend(loc="upper left")
    save(fig, "12_greedy_vs_beam.png")


run(main)
