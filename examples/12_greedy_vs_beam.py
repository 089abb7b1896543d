"""Example 12 — §6.1 decoding: greedy search against beam search (beam 4, length penalty α = 0.6).

Greedy takes the most probable token at every step; beam search keeps the 4 best partial translations and
picks the best log P(Y | X) / lp(Y), the penalty keeping it from preferring short outputs. Hugging Face's lp
is |Y|^α; the paper's α belongs to GNMT's ((5 + |Y|) / 6)^α [38], which favours longer outputs less. A few
validation sentences are decoded both ways and scored with |Y|^α (beam: `sequences_scores`; greedy: the same
formula over `compute_transition_scores`); then the first --scan with each formula's own search, counting
where they differ and scoring the first such pair under both formulas.
"""

import torch

from common import load_trained, model_parser, plt, run, save, validation_lines
from modeling_vaswani.model.beam_search import gnmt_length_penalty
from modeling_vaswani.model.generation import PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH

NUM_BEAMS, ALPHA = 4, 0.6  # §6.1
PENALTIES = {"gnmt": gnmt_length_penalty, "hf": lambda length, alpha: length ** alpha}  # Hugging Face's: |Y|^α
SEARCHES = {"gnmt": PAPER_SEARCH, "hf": TRANSFORMERS_BEAM_SEARCH}  # the search that ranks by each


@torch.no_grad()
def main():
    parser = model_parser(__doc__)
    parser.add_argument("--count", type=int, default=5, help="how many validation sentences (default 5)")
    parser.add_argument("--scan", type=int, default=100,
                        help="how many validation sentences to search for a length-penalty difference (default 100)")
    parser.add_argument("--source_lang", default="en", help="the model's source language (default en)")
    parser.add_argument("--target_lang", default="de", help="the model's target language (default de)")
    args = parser.parse_args()
    if args.count < 1:
        raise ValueError(f"--count must be at least 1, got {args.count}")
    model, tokenizer = load_trained(args.model)
    sources = validation_lines(args.source_lang)[: args.count]
    references = validation_lines(args.target_lang)[: args.count]
    encoded = tokenizer(sources, return_tensors="pt", padding=True)

    # Greedy: out.scores holds one (B, V) tensor per step; normalize_logits makes them log-probabilities.
    out = model.generate(**encoded, num_beams=1, do_sample=False, output_scores=True, return_dict_in_generate=True)
    greedy_ids = out.sequences
    token_log_probs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    real = greedy_ids[:, 1:] != tokenizer.pad_token_id  # |Y|: after the start token, up to </s> (then padding)
    greedy_logp, greedy_len = (token_log_probs * real).sum(-1), real.sum(-1)
    out = model.generate(**encoded, num_beams=NUM_BEAMS, length_penalty=ALPHA, do_sample=False,
                         output_scores=True, return_dict_in_generate=True, **TRANSFORMERS_BEAM_SEARCH)
    beam_ids, beam_scores = out.sequences, out.sequences_scores
    token_log_probs = model.compute_transition_scores(out.sequences, out.scores, out.beam_indices)
    real = out.beam_indices[:, : token_log_probs.shape[1]] >= 0  # -1 marks steps after the hypothesis ended
    beam_logp, beam_len = (token_log_probs * real).sum(-1), real.sum(-1)
    greedy_scores = greedy_logp / greedy_len.float() ** ALPHA  # the same score beam search ranks by
    # generate's own beam score must be log P / |Y|^α for the hypothesis it returns.
    assert torch.allclose(beam_scores, beam_logp / beam_len.float() ** ALPHA, atol=1e-4), (beam_scores, beam_logp)

    greedy_texts = tokenizer.batch_decode(greedy_ids, skip_special_tokens=True)
    beam_texts = tokenizer.batch_decode(beam_ids, skip_special_tokens=True)
    print(f"score = log P(Y|X) / |Y|^{ALPHA}; higher is better. Beam size {NUM_BEAMS}.\n")
    for i, source in enumerate(sources):
        print(f"[{i}] source:    {source}\n    reference: {references[i]}")
        print(f"    greedy:    {greedy_texts[i].strip():<60}  log P {greedy_logp[i]:7.3f}  |Y| {int(greedy_len[i]):2d}"
              f"  score {greedy_scores[i]:7.3f}")
        print(f"    beam {NUM_BEAMS}:    {beam_texts[i].strip():<60}  log P {beam_logp[i]:7.3f}  "
              f"|Y| {int(beam_len[i]):2d}  score {beam_scores[i]:7.3f}  (sequences_scores)")
    # Scored along two code paths (batched beams, a separate greedy pass): float rounding, the tolerance above.
    better = int((beam_scores >= greedy_scores - 1e-4).sum())
    same = sum(g.strip() == b.strip() for g, b in zip(greedy_texts, beam_texts))
    print(f"\nbeam score ≥ greedy score for {better} of {len(sources)} sentences; identical text for {same}.")
    lengths_shown, differing = compare_length_penalties(model, tokenizer, args)

    fig, (axis, right) = plt.subplots(1, 2, figsize=(1.4 * len(sources) + 9, 4),
                                      gridspec_kw={"width_ratios": [1.4 * len(sources) + 3, 6]})
    positions = range(len(sources))
    axis.bar([p - 0.2 for p in positions], greedy_scores.numpy(), width=0.4, label="greedy")
    axis.bar([p + 0.2 for p in positions], beam_scores.numpy(), width=0.4, label=f"beam {NUM_BEAMS}, α = {ALPHA}")
    axis.set_xticks(list(positions), [f"val #{i}" for i in positions])
    axis.set(ylabel=f"log P(Y|X) / |Y|^{ALPHA}  (higher is better)",
             title="Greedy vs beam search on Multi30k sentences")
    axis.axhline(0, color="black", lw=0.8)
    axis.legend(loc="lower right")  # the bars grow downwards from 0
    for name, label in (("gnmt", "GNMT (paper): ((5 + |Y|) / 6)^α"), ("hf", "Hugging Face: |Y|^α")):
        right.plot(range(1, 41), [PENALTIES[name](n, ALPHA) for n in range(1, 41)], label=label)
    for n in lengths_shown:
        right.axvline(n, color="grey", lw=0.8, ls=":")
    right.set(xlabel="|Y| (generated tokens, </s> included)", ylabel=f"lp(Y), α = {ALPHA}",
              title=f"Length penalties ({differing} of {args.scan} sentences decode differently)")
    right.legend(loc="upper left")
    save(fig, "12_greedy_vs_beam.png")


def compare_length_penalties(model, tokenizer, args):
    """Decode `--scan` sentences with each formula's search; print the first whose translations differ.
    Returns the |Y| of that sentence's two translations (for the figure) and how many differ."""
    print(f"\nlength penalty with α = {ALPHA}:   |Y| " + "".join(f"{n:>7d}" for n in (1, 5, 10, 20, 40)))
    for name in PENALTIES:
        print(f"    {name:<4} " + " " * 22 + "".join(f"{PENALTIES[name](n, ALPHA):7.3f}" for n in (1, 5, 10, 20, 40)))
    sources, eos = validation_lines(args.source_lang)[: args.scan], tokenizer.eos_token_id
    results = {name: ([], [], []) for name in PENALTIES}  # texts, scores, |Y| (up to and including the first </s>)
    for name, (texts, scores, lengths) in results.items():
        for start in range(0, len(sources), 32):
            encoded = tokenizer(sources[start:start + 32], return_tensors="pt", padding=True)
            out = model.generate(**encoded, num_beams=NUM_BEAMS, length_penalty=ALPHA, output_scores=True,
                                 return_dict_in_generate=True, **SEARCHES[name])
            texts += tokenizer.batch_decode(out.sequences, skip_special_tokens=True)
            scores += out.sequences_scores.tolist()
            lengths += [ids.index(eos) + 1 if eos in ids else len(ids) for ids in out.sequences[:, 1:].tolist()]
    differ = [i for i in range(len(sources)) if results["gnmt"][0][i].strip() != results["hf"][0][i].strip()]
    print(f"\nbeam {NUM_BEAMS}: the paper's search (GNMT's length penalty) and Hugging Face's (|Y|^α) choose "
          f"different translations for {len(differ)} of {len(sources)} validation sentences.")
    if not differ:
        return [], 0
    print(f"[val #{differ[0]}] source: {sources[differ[0]]}")
    shown = []
    for name in PENALTIES:
        text, score, length = (column[differ[0]] for column in results[name])
        log_p = score * PENALTIES[name](length, ALPHA)  # the search's score is log P / lp(Y)
        under = "   ".join(f"{other}: {log_p / PENALTIES[other](length, ALPHA):7.3f}" for other in PENALTIES)
        print(f"    chosen with {name:<4}: {text.strip():<60}  log P {log_p:7.3f}  |Y| {length:2d}  score {under}")
        shown.append(length)
    print("    Each formula scores both translations; dividing by |Y|^α favours the longer one more.")
    return shown, len(differ)


run(main)
