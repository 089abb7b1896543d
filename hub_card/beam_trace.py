"""The beam trace: beam_search.py's state after every step, for a reader to follow §6.1's search.

`model.generate(..., beam_trace=trace)` with `trace` a list appends one dict per decoding step (nothing
else changes; without it, nothing is recorded):

    {"step": t,           # tokens generated so far, after this step (1, 2, ...)
     "alive":    [[(token_ids, log_prob, score), ...], ...],  # per sentence, the k live hypotheses, best first
     "finished": [[(token_ids, log_prob, score), ...], ...],  # per sentence, its finished list so far, best first
     "bound":    [float, ...],   # per sentence: best live log P / lp(max_length), the stopping rule's bound
     "done":     [bool, ...]}    # per sentence: whether the search has stopped for it (at or before this step)

token_ids: the generated tokens (after the decoder start token; </s> included for finished ones);
log_prob: log P(Y|X); score: log_prob / lp(len(token_ids)), GNMT's penalty of §6.1. Sentences keep
their input order after done ones leave the batch; a done sentence repeats its last state.
"""

import torch


def record(trace, step, batch, sentence, seq, logp, fin, bound, done, prompt, lp):
    """Append step `step`: `sentence` (A,) numbers the active rows of `seq` (A, k, L) and `logp` (A, k),
    `fin` holds their finished hypotheses (seq, logp, length; length 0 marks an empty place), `lp(|Y|)`
    is the length penalty."""
    last = trace[-1] if trace else {name: [None] * batch for name in ("alive", "finished", "bound", "done")}
    entry = {"step": step, **{name: list(last[name]) for name in ("alive", "finished", "bound", "done")}}

    def listed(seqs, log_probs, lengths):
        return [(ids[prompt:prompt + m], p, p / lp(m))
                for ids, p, m in zip(seqs.tolist(), log_probs.tolist(), lengths.tolist()) if m > 0]

    for row, s in enumerate(sentence.tolist()):
        if not last["done"][s]:
            entry["alive"][s] = listed(seq[row], logp[row], torch.full_like(fin["length"][row], step))
            entry["finished"][s] = listed(fin["seq"][row], fin["logp"][row], fin["length"][row])
            entry["bound"][s], entry["done"][s] = float(bound[row]), bool(done[row])
    trace.append(entry)
