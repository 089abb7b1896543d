"""Example 12 — §6.1 decoding: greedy search against beam search (beam 4, length penalty α = 0.6).

Greedy takes the most probable token at every step; beam search keeps the 4 best partial translations
and picks the best score log P(Y | X) / lp(Y), the penalty keeping it from preferring short outputs.
Hugging Face's lp is |Y|^α; the paper's α = 0.6 belongs to GNMT's ((5 + |Y|) / 6)^α [38], which grows
slower, so favours longer outputs less. The script translates a few Multi30k validation sentences both
ways, prints each translation with log P and its score (beam: generate's `sequences_scores`; greedy:
the same formula over `compute_transition_scores`; both with |Y|^α, so they compare) and draws them.
Then it decodes the first --scan sentences with the paper's search (GNMT's penalty, tensor2tensor's
stop) and Hugging Face's, counts where they differ and scores the first such pair under both formulas.

    python examples/12_greedy_vs_beam.py --model outputs/multi30k-en-de --count 8
"""

import torch

from common import load_trained, model_parser, plt, run, save, validation_lines
from modeling_vaswani.model.beam_search import gnmt_length_penalty
from modeling_vaswani.model.generation import PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH

NUM_BEAMS, ALPHA = 4, 0.6  # §6.1
PENALTIES = {"gnmt": gnmt_length_penalty, "hf": lambda length, alpha: length ** alpha}  # Hugging Face's: |Y|^α
SEARCHES = {"gnmt": PAPER_SEARCH, "hf": TRANSFORMERS_BEAM_SEARCH}  # the search that ranks by each


def greedy(model, encoded, pad_token_id):
    """Greedy search; returns ids, log P(Y|X) and |Y| (generated tokens up to and including </s>)."""
    out = model.generate(**encoded, num_beams=1, do_sample=False, output_scores=True, return_dict_in_generate=True)
    # out.scores holds one (B, V) tensor per step; normalize_logits turns them into log-probabilities.
    token_log_probs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    real = out.sequences[:, 1:] != pad_token_id  # after the start token; finished sentences are padded after </s>
    return out.sequences, (token_log_probs * real).sum(-1), real.sum(-1)


def beam(model, encoded):
    """Beam search (beam 4, α = 0.6); returns ids, log P(Y|X), |Y| and generate's sequences_scores."""
    out = model.generate(**encoded, num_beams=NUM_BEAMS, length_penalty=ALPHA, do_sample=False,
                         output_scores=True, return_dict_in_generate=True, **TRANSFORMERS_BEAM_SEARCH)
    token_log_probs = model.compute_transition_scores(out.sequences, out.scores, out.beam_indices)
    real = out.beam_indices[:, : token_log_probs.shape[1]] >= 0  # -1 marks steps after the hypothesis ended
    return out.sequences, (token_log_probs * real).sum(-1), real.sum(-1), out.sequences_scores


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

    with torch.no_grad():
        greedy_ids, greedy_logp, greedy_len = greedy(model, encoded, tokenizer.pad_token_id)
        beam_ids, beam_logp, beam_len, beam_scores = beam(model, encoded)
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
    # The same output scored along two code paths (batched beams, a separate greedy pass) differs
    # by float rounding, so compare with the tolerance of the check above.
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
    lengths = list(range(1, 41))
    for name, label in (("gnmt", "GNMT (paper): ((5 + |Y|) / 6)^α"), ("hf", "Hugging Face: |Y|^α")):
        right.plot(lengths, [PENALTIES[name](n, ALPHA) for n in lengths], label=label)
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
    sources = validation_lines(args.source_lang)[: args.scan]
    results = {}  # name: (texts, scores, |Y|s)
    for name in PENALTIES:
        texts, scores, lengths = [], [], []
        for start in range(0, len(sources), 32):
            encoded = tokenizer(sources[start:start + 32], return_tensors="pt", padding=True)
            out = model.generate(**encoded, num_beams=NUM_BEAMS, length_penalty=ALPHA, output_scores=True,
                                 return_dict_in_generate=True, **SEARCHES[name])
            texts += tokenizer.batch_decode(out.sequences, skip_special_tokens=True)
            scores += out.sequences_scores.tolist()
            for tokens in out.sequences[:, 1:].tolist():  # |Y|: up to and including the first </s>
                eos = tokenizer.eos_token_id
                lengths.append(tokens.index(eos) + 1 if eos in tokens else len(tokens))
        results[name] = texts, scores, lengths
    differ = [i for i in range(len(sources)) if results["gnmt"][0][i].strip() != results["hf"][0][i].strip()]
    print(f"\nbeam {NUM_BEAMS}: the paper's search (GNMT's length penalty) and Hugging Face's (|Y|^α) choose "
          f"different translations for {len(differ)} of {len(sources)} validation sentences.")
    if not differ:
        return [], 0
    i = differ[0]
    print(f"[val #{i}] source: {sources[i]}")
    shown = []
    for name in PENALTIES:
        text, score, length = (column[i] for column in results[name])
        log_p = score * PENALTIES[name](length, ALPHA)  # the search's score is log P / lp(Y)
        under = "   ".join(f"{other}: {log_p / PENALTIES[other](length, ALPHA):7.3f}" for other in PENALTIES)
        print(f"    chosen with {name:<4}: {text.strip():<60}  log P {log_p:7.3f}  |Y| {length:2d}  score {under}")
        shown.append(length)
    print("    Each formula scores both translations; dividing by |Y|^α favours the longer one more.")
    return shown, len(differ)


run(main)
