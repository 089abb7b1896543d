"""§6.1's beam search: GNMT's length penalty, the stopping bound, its choice, prompts and caches, the trace."""

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import GenerationConfig, GenerationMixin, LogitsProcessorList
from transformers.generation.stopping_criteria import EosTokenCriteria, MaxLengthCriteria, StoppingCriteriaList
from transformers.modeling_outputs import BaseModelOutput

from checks import EOS
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.model import beam_search as search
from modeling_vaswani.model import generation
from modeling_vaswani.model.beam_search import gnmt_length_penalty
from modeling_vaswani.model.generation import PAPER_DECODING, PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH


@pytest.fixture
def boosted(make_model):
    """boosted(seed=0, eos_boost=1.5): the tiny model, its </s> logit scaled up: hypotheses end at varied steps."""
    def make(seed=0, eos_boost=1.5):
        model = make_model(seed)
        with torch.no_grad():
            model.lm_head.weight[EOS] *= eos_boost
        return model

    return make


def padded_batch(seed=0, batch=5, length=9):
    ids = torch.randint(3, 40, (batch, length), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[3, 4:] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.fixture
def calls(monkeypatch):
    """Which beam search generate() ran: "paper" (beam_search.py) or "transformers" (GenerationMixin's)."""
    ran = []
    for module, name, label in ((generation, "beam_search", "paper"), (GenerationMixin, "_beam_search", "transformers")):
        def counting(*args, _original=getattr(module, name), _label=label, **kwargs):
            ran.append(_label)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)
    return ran


def test_returned_scores_are_log_prob_over_gnmt_penalty(boosted):
    """sequences_scores = log P(Y|X) / ((5 + |Y|)/6)^α, recomputed by teacher forcing."""
    model, (ids, mask) = boosted(), padded_batch()
    out = model.generate(input_ids=ids, attention_mask=mask, num_return_sequences=2, output_scores=True,
                         return_dict_in_generate=True)
    assert out.sequences.shape[0] == 2 * ids.shape[0]
    for row, sequence in enumerate(out.sequences):
        sentence = row // 2
        tokens = sequence[1:].tolist()
        length = tokens.index(EOS) + 1 if EOS in tokens else len(tokens)
        with torch.no_grad():
            logits = model(input_ids=ids[sentence:sentence + 1], attention_mask=mask[sentence:sentence + 1],
                           decoder_input_ids=sequence[None, :length]).logits
        log_p = torch.log_softmax(logits[0], -1).gather(-1, sequence[1:length + 1, None]).sum()
        assert float(out.sequences_scores[row]) == pytest.approx(float(log_p) / ((5 + length) / 6) ** 0.6, abs=1e-4)
    # Best first within each sentence; one log-probability tensor per step.
    assert torch.all(out.sequences_scores.view(-1, 2)[:, 0] >= out.sequences_scores.view(-1, 2)[:, 1])
    assert len(out.scores) == out.sequences.shape[1] - 1 and out.scores[0].shape == (4 * ids.shape[0], 40)


class ScriptedModel:
    """Next-token probabilities from a table (prefix → {token: p}), the rest spread evenly; no cache."""

    config = SimpleNamespace(is_encoder_decoder=True)

    def __init__(self, table, vocab_size=8):
        self.table, self.vocab_size = table, vocab_size

    def __call__(self, decoder_input_ids=None, **kwargs):
        rows = []
        for prefix in decoder_input_ids.tolist():
            chosen = self.table.get(tuple(prefix[1:]), {})
            rest = (1.0 - sum(chosen.values())) / (self.vocab_size - len(chosen))
            rows.append([chosen.get(token, rest) for token in range(self.vocab_size)])
        probabilities = torch.tensor(rows, dtype=torch.float64)
        return SimpleNamespace(logits=probabilities.log().float()[:, None, :])


A, B, C = 3, 4, 5
# Step 1: "b" 0.35, </s> 0.30, "a" 0.28; "a </s>" is likely; "b c c </s>" is very likely.
TABLE = {(): {B: 0.35, EOS: 0.30, A: 0.28}, (A,): {EOS: 0.6}, (B,): {C: 0.95}, (B, C): {C: 0.95},
         (B, C, C): {EOS: 0.95}}


def run_scripted(max_new_tokens=10, trace=None):
    config = GenerationConfig(num_beams=2, length_penalty=0.6, max_length=1 + max_new_tokens, eos_token_id=EOS,
                              pad_token_id=0, return_dict_in_generate=True, output_scores=True)
    config._eos_token_tensor, config._pad_token_tensor = torch.tensor([EOS]), torch.tensor(0)
    criteria = StoppingCriteriaList([MaxLengthCriteria(1 + max_new_tokens), EosTokenCriteria(torch.tensor([EOS]))])
    start = torch.ones(2, 1, dtype=torch.long)  # one sentence, two beams
    return search.beam_search(ScriptedModel(TABLE), start, LogitsProcessorList(), criteria, config, beam_trace=trace,
                              encoder_outputs=BaseModelOutput(last_hidden_state=torch.zeros(2, 1, 1)), use_cache=False)


def test_bound_keeps_searching_after_k_finished_and_at_the_limit_only_ended_hypotheses_are_translations():
    """Beam 2. Step 1 finishes "</s>" (score log 0.30 = −1.204); step 2 finishes "a </s>"
    (−1.784 / lp(2) = −1.626): two finished, where transformers' early_stopping=True would stop with
    the empty output. The live "b c" (log P −1.101) could still reach −1.101 / lp(10) = −0.635 > −1.204,
    so the search goes on and finds "b c c </s>": (log .35 + 3 log .95) / lp(4) = −0.943.
    With room for 3 tokens "b c c </s>" cannot end; the cut "b c c" is no translation, so the best
    hypothesis that ended is: "</s>" (tensor2tensor's rule; transformers' would return "b c c")."""
    lp = gnmt_length_penalty
    trace = []
    paper = run_scripted(trace=trace)
    assert paper.sequences.tolist() == [[1, B, C, C, EOS]]
    expected = (math.log(0.35) + 3 * math.log(0.95)) / lp(4, 0.6)
    assert float(paper.sequences_scores[0]) == pytest.approx(expected, rel=1e-6) and expected > math.log(0.30)
    assert len(paper.scores) == len(trace) == 4
    step2 = trace[1]
    assert [hypothesis[0] for hypothesis in step2["finished"][0]] == [[EOS], [A, EOS]]
    assert step2["bound"][0] == pytest.approx((math.log(0.35) + math.log(0.95)) / lp(10, 0.6), rel=1e-6)
    assert step2["done"] == [False] and step2["bound"][0] > math.log(0.30)
    # After step 4 the best live hypothesis ("b c c" + another token, log P ≈ −6.1) is bounded by
    # −6.1 / lp(10) ≈ −3.5 < −0.943: done, although the limit (10 tokens) is far.
    assert trace[-1]["done"] == [True] and trace[-1]["finished"][0][0][0] == [B, C, C, EOS]
    ended = run_scripted(max_new_tokens=3)
    assert ended.sequences.tolist() == [[1, EOS]]
    assert float(ended.sequences_scores[0]) == pytest.approx(math.log(0.30), rel=1e-6)


def test_new_models_search_as_the_paper_and_transformers_search_is_generation_mixins_own(tmp_path, calls, boosted):
    model, (ids, mask) = boosted(), padded_batch()
    assert {k: getattr(model.generation_config, k) for k in PAPER_SEARCH} == PAPER_SEARCH == {
        k: PAPER_DECODING[k] for k in PAPER_SEARCH}
    paper = model.generate(input_ids=ids, attention_mask=mask)
    model.save_pretrained(tmp_path)  # saved with generation_config.json, and chosen again after loading
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.generate(input_ids=ids, attention_mask=mask), paper)
    assert torch.equal(model.generate(input_ids=ids, attention_mask=mask, **PAPER_SEARCH), paper)  # asked for
    assert calls == ["paper"] * 3
    calls.clear()
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=14, output_scores=True,
                  return_dict_in_generate=True)
    theirs = model.generate(**kwargs, **TRANSFORMERS_BEAM_SEARCH)
    assert calls == ["transformers"]
    direct = GenerationMixin.generate(model, **kwargs)  # transformers' generate, no choice of ours involved
    assert torch.equal(theirs.sequences, direct.sequences)
    assert torch.equal(theirs.sequences_scores, direct.sequences_scores)
    # A generation_config.json saved before the entries existed: transformers' search, as it was.
    for name in PAPER_SEARCH:
        delattr(model.generation_config, name)
    assert torch.equal(model.generate(**kwargs).sequences, theirs.sequences)
    assert calls == ["transformers"] * 3
    # On such a model the paper's search is one call argument away, and here decodes differently.
    assert not torch.equal(model.generate(input_ids=ids, attention_mask=mask, **PAPER_SEARCH),
                           model.generate(input_ids=ids, attention_mask=mask))
    assert calls[-2:] == ["paper", "transformers"]


def test_other_modes_are_transformers_own_and_other_settings_are_refused(calls, boosted):
    model, (ids, mask) = boosted(), padded_batch()
    greedy = model.generate(input_ids=ids, attention_mask=mask, num_beams=1, max_new_tokens=8)
    assert torch.equal(greedy, model.generate(input_ids=ids, attention_mask=mask, num_beams=1, max_new_tokens=8,
                                              **TRANSFORMERS_BEAM_SEARCH))
    torch.manual_seed(0)
    sampled = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=8)
    torch.manual_seed(0)
    assert torch.equal(sampled, model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=8,
                                               **TRANSFORMERS_BEAM_SEARCH))
    assert "paper" not in calls  # sampling with 4 beams is transformers' beam sampling
    for name, value in (("beam_termination", "soon"), ("beam_termination", "early_stopping"),
                        ("length_penalty_formula", "hf"), ("max_new_tokens", 0), ("max_new_tokens", -1)):
        with pytest.raises(ValueError, match=name) as error:
            model.generate(input_ids=ids, **{name: value})
        assert repr(value) in str(error.value)
    with pytest.raises(ValueError, match="beam_trace"):
        model.generate(input_ids=ids, num_beams=1, beam_trace=[])
    # What only transformers' search returns is asked of it, not silently left out.
    with pytest.raises(ValueError, match="TRANSFORMERS_BEAM_SEARCH"):
        model.generate(input_ids=ids, output_attentions=True, return_dict_in_generate=True)
    assert model.generate(input_ids=ids, output_attentions=True, return_dict_in_generate=True,
                          **TRANSFORMERS_BEAM_SEARCH).cross_attentions


def test_papers_search_handles_padding_the_cache_limits_and_min_length(boosted):
    model, (ids, mask) = boosted(), padded_batch()
    # A sentence alone and in a padded batch (the same limit): the same translation.
    batch = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12)
    alone = model.generate(input_ids=ids[3:4, :4], max_new_tokens=12)
    assert torch.equal(batch[3, :alone.shape[1]], alone[0])
    # Without the cache (each step recomputing the whole prefix): the same (greedy search: test_properties.py).
    assert torch.equal(batch, model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, use_cache=False))
    # max_new_tokens bounds the output; min_new_tokens keeps </s> away until then.
    assert model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=3).shape[1] <= 4
    longer = model.generate(input_ids=ids, attention_mask=mask, min_new_tokens=6, max_new_tokens=12)
    assert not (longer[:, 1:7] == EOS).any()
    # A sentence whose hypotheses never end: the best live one at the limit (input + 50 by default).
    endless = model.generate(input_ids=ids[:1], suppress_tokens=[EOS])
    assert endless.shape == (1, 1 + ids.shape[1] + 50) and EOS not in endless
    # More beams than the vocabulary has tokens: beams past it hold low-scoring hypotheses.
    many = model.generate(input_ids=ids[:1], num_beams=50, num_return_sequences=50, max_new_tokens=3)
    assert many.shape[0] == 50 and many.shape[1] <= 4 and (many[:, 0] == 1).all() and many.max() < 40


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_done_sentences_leaving_the_batch_change_nothing(seed, boosted):
    model = boosted(seed, eos_boost=1.3 + 0.2 * seed)
    ids, mask = padded_batch(seed, batch=7)
    for n in (1, 3):
        kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=20, num_return_sequences=n)
        kept = model.generate(**kwargs, return_dict_in_generate=True)
        assert torch.equal(model.generate(**kwargs), kept.sequences)


@pytest.mark.parametrize("first_search", ["paper", "greedy"])
def test_generate_continues_from_the_cache_it_returned(first_search, boosted):
    """The cache generate() returned, passed back with its sequences, decodes as without it."""
    model, (ids, mask) = boosted(), padded_batch()
    settings = dict(input_ids=ids, attention_mask=mask, output_scores=True, return_dict_in_generate=True)
    first = model.generate(**settings, max_new_tokens=3, **({"num_beams": 1} if first_search == "greedy" else {}))
    prefix = first.sequences
    assert first.cache.get_seq_length() == prefix.shape[1] - 1
    prompt = dict(decoder_input_ids=prefix, decoder_attention_mask=torch.ones_like(prefix), max_new_tokens=6)
    continued = model.generate(**settings, **prompt, cache=first.cache)
    fresh = model.generate(**settings, **prompt)
    assert torch.equal(continued.sequences, fresh.sequences)
    assert torch.equal(continued.sequences[:, :prefix.shape[1]], prefix)
    torch.testing.assert_close(continued.sequences_scores, fresh.sequences_scores, rtol=0, atol=1e-5)
    # The mask of ones is no mask at all.
    assert torch.equal(model.generate(input_ids=ids, attention_mask=mask, decoder_input_ids=prefix, max_new_tokens=6),
                       fresh.sequences)


def test_the_trace_records_each_step_and_ends_with_what_generate_returns(boosted):
    model, (ids, mask) = boosted(eos_boost=2.0), padded_batch()
    trace = []
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=20, beam_trace=trace)
    assert torch.equal(out, model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=20))
    assert [entry["step"] for entry in trace] == list(range(1, len(trace) + 1))
    last = trace[-1]
    assert all(last["done"]) and sum(trace[-2]["done"]) == 4  # four done early, one at the limit
    for sentence, row in enumerate(out.tolist()):
        finished = last["finished"][sentence]
        if finished:  # the best finished hypothesis is the translation
            tokens, log_prob, score = finished[0]
            assert tokens == row[1:row.index(EOS, 1) + 1]
            assert score == pytest.approx(log_prob / gnmt_length_penalty(len(tokens), 0.6))
        else:  # none ended by the limit: the best live one
            assert last["alive"][sentence][0][0] == row[1:] and len(row[1:]) == 20
    assert sum(bool(finished) for finished in last["finished"]) == 4
    for before, entry in zip([{"done": [False] * 5}] + trace, trace):
        for sentence in (s for s, done in enumerate(before["done"]) if not done):
            alive, finished = entry["alive"][sentence], entry["finished"][sentence]
            assert len(alive) == 4 and len(finished) <= 4
            assert all(len(tokens) == entry["step"] and EOS not in tokens for tokens, _, _ in alive)
            assert [p for _, p, _ in alive] == sorted((p for _, p, _ in alive), reverse=True)
            assert [s for _, _, s in finished] == sorted((s for _, _, s in finished), reverse=True)
            assert all(tokens[-1] == EOS for tokens, _, _ in finished)
            assert entry["bound"][sentence] == pytest.approx(alive[0][1] / gnmt_length_penalty(20, 0.6))
    # A done sentence (gone from the batch) repeats its last state; sentences keep their input order.
    left = [(before, after) for before, after in zip(trace, trace[1:]) if any(before["done"])]
    assert left
    for before, after in left:
        for sentence in (s for s, done in enumerate(before["done"]) if done):
            assert all(after[key][sentence] == before[key][sentence] for key in ("alive", "finished", "bound", "done"))
