"""Tests for modeling_vaswani.model.beam_search: §6.1's beam search — GNMT's length penalty, the
stopping bound, equality with transformers' beam search under its own rules, the choice by the
generation config, and custom_generate/generate.py in a process without this package."""

import json
import math
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from transformers import GenerationConfig, LogitsProcessorList
from transformers.generation.stopping_criteria import EosTokenCriteria, MaxLengthCriteria, StoppingCriteriaList
from transformers.modeling_outputs import BaseModelOutput

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.model import beam_search as search
from modeling_vaswani.model.beam_search import gnmt_length_penalty, hf_length_penalty, sequence_score
from modeling_vaswani.model.generation import PAPER_DECODING, TRANSFORMERS_BEAM_SEARCH
from modeling_vaswani.model.loading import CUSTOM_GENERATE_FILE

EOS = 2
HF_RULES = dict(length_penalty_formula="hf", beam_termination="early_stopping")
PAPER = dict(length_penalty_formula="gnmt", beam_termination="bound")


def tiny_model(seed=0, eos_boost=1.5):
    """A random 2-layer model whose </s> logit is scaled up, so that hypotheses end at varied steps."""
    torch.manual_seed(seed)
    model = VaswaniForConditionalGeneration(VaswaniConfig(vocab_size=40, d_model=16, d_ff=32, num_heads=4,
                                                          num_layers=2, dropout=0.0)).eval()
    with torch.no_grad():
        model.lm_head.weight[EOS] *= eos_boost
    return model


def padded_batch(seed=0, batch=5, length=9):
    ids = torch.randint(3, 40, (batch, length), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[3, 4:] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.fixture
def calls(monkeypatch):
    """How often generate() ran this module's beam search."""
    count = []
    original = search.beam_search

    def counting(*args, **kwargs):
        count.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(search, "beam_search", counting)
    return count


# ---- GNMT's length penalty by hand --------------------------------------------------------------

def test_gnmt_length_penalty_by_hand():
    assert gnmt_length_penalty(1, 0.6) == 1.0  # ((5 + 1) / 6)^α
    assert gnmt_length_penalty(7, 0.6) == pytest.approx(2.0 ** 0.6)  # ((5 + 7) / 6)^α = 2^α
    assert gnmt_length_penalty(13, 0.5) == pytest.approx(math.sqrt(3.0))
    assert gnmt_length_penalty(40, 0.0) == 1.0  # α = 0: plain log-probability
    assert hf_length_penalty(4, 0.5) == 2.0  # transformers' |Y|^α
    # log P = -3 over 7 tokens: GNMT divides by 2^0.6, transformers by 7^0.6.
    assert sequence_score(-3.0, 7, 0.6) == pytest.approx(-3.0 / 1.515716566)
    assert sequence_score(-3.0, 7, 0.6, "hf") == pytest.approx(-3.0 / 3.2140958)
    # GNMT's penalty grows more slowly with |Y| than |Y|^α: it favours long outputs less.
    assert all(gnmt_length_penalty(n, 0.6) < hf_length_penalty(n, 0.6) for n in range(2, 60))


def test_returned_scores_are_log_prob_over_gnmt_penalty():
    """sequences_scores = log P(Y|X) / ((5 + |Y|)/6)^α, recomputed by teacher forcing."""
    model = tiny_model()
    ids, mask = padded_batch()
    out = model.generate(input_ids=ids, attention_mask=mask, num_return_sequences=2, output_scores=True,
                         return_dict_in_generate=True)
    assert out.sequences.shape[0] == 2 * ids.shape[0]
    for row, sequence in enumerate(out.sequences):
        sentence = row // 2
        tokens = sequence[1:].tolist()
        length = tokens.index(EOS) + 1 if EOS in tokens else len(tokens)
        decoder_input = sequence[None, :length]
        with torch.no_grad():
            logits = model(input_ids=ids[sentence:sentence + 1], attention_mask=mask[sentence:sentence + 1],
                           decoder_input_ids=decoder_input).logits
        log_p = torch.log_softmax(logits[0], -1).gather(-1, sequence[1:length + 1, None]).sum()
        expected = float(log_p) / ((5 + length) / 6) ** 0.6
        assert float(out.sequences_scores[row]) == pytest.approx(expected, abs=1e-4)
    # Best first within each sentence.
    assert torch.all(out.sequences_scores.view(-1, 2)[:, 0] >= out.sequences_scores.view(-1, 2)[:, 1])


# ---- the stopping bound by hand -----------------------------------------------------------------

class ScriptedModel:
    """A "model" whose next-token probabilities come from a table: prefix → {token: p}; the rest of the
    probability is spread evenly over the other tokens. No cache: each step sees the whole prefix."""

    config = SimpleNamespace(is_encoder_decoder=True)

    def __init__(self, table, vocab_size=8):
        self.table, self.vocab_size = table, vocab_size

    def forward(self, decoder_input_ids=None, cache=None, **kwargs):
        rows = []
        for prefix in decoder_input_ids.tolist():
            chosen = self.table.get(tuple(prefix[1:]), {})
            rest = (1.0 - sum(chosen.values())) / (self.vocab_size - len(chosen))
            rows.append([chosen.get(token, rest) for token in range(self.vocab_size)])
        probabilities = torch.tensor(rows, dtype=torch.float64)
        return SimpleNamespace(logits=probabilities.log().float()[:, None, :])

    __call__ = forward


A, B, C = 3, 4, 5
# Step 1: "b" 0.35, </s> 0.30, "a" 0.28; "a </s>" is likely; "b c c </s>" is very likely.
TABLE = {(): {B: 0.35, EOS: 0.30, A: 0.28}, (A,): {EOS: 0.6}, (B,): {C: 0.95}, (B, C): {C: 0.95},
         (B, C, C): {EOS: 0.95}}


def run_scripted(termination, max_new_tokens=10, early_stopping=True):
    config = GenerationConfig(num_beams=2, length_penalty=0.6, early_stopping=early_stopping,
                              max_length=1 + max_new_tokens, eos_token_id=EOS, pad_token_id=0,
                              return_dict_in_generate=True, output_scores=True)
    config._eos_token_tensor, config._pad_token_tensor = torch.tensor([EOS]), torch.tensor(0)
    criteria = StoppingCriteriaList([MaxLengthCriteria(1 + max_new_tokens), EosTokenCriteria(torch.tensor([EOS]))])
    start = torch.ones(2, 1, dtype=torch.long)  # one sentence, two beams
    return search.beam_search(ScriptedModel(TABLE), start, LogitsProcessorList(), criteria, config,
                              length_penalty_formula="gnmt", beam_termination=termination,
                              encoder_outputs=BaseModelOutput(last_hidden_state=torch.zeros(2, 1, 1)),
                              use_cache=False)


def test_bound_keeps_searching_where_early_stopping_stops_and_finds_the_better_translation():
    """Beam 2. Step 1 finishes "</s>" (score log 0.30 = −1.204); step 2 finishes "a </s>"
    (−1.784 / lp(2) = −1.626): two finished, so early_stopping=True stops with the empty output.
    The live "b c" (log P −1.101) could still reach −1.101 / lp(10) = −0.635 > −1.204, so the bound
    goes on and finds "b c c </s>": (log .35 + 3 log .95) / lp(4) = −0.943, the better translation."""
    lp = gnmt_length_penalty
    stopped = run_scripted("early_stopping")
    assert len(stopped.scores) == 2
    assert stopped.sequences.tolist() == [[1, EOS]]
    assert float(stopped.sequences_scores[0]) == pytest.approx(math.log(0.30), rel=1e-6)
    # At that point the bound says the search may not stop yet:
    best_alive = math.log(0.35) + math.log(0.95)
    assert best_alive / lp(10, 0.6) > math.log(0.30)

    paper = run_scripted("bound")
    assert len(paper.scores) == 4
    assert paper.sequences.tolist() == [[1, B, C, C, EOS]]
    expected = (math.log(0.35) + 3 * math.log(0.95)) / lp(4, 0.6)
    assert float(paper.sequences_scores[0]) == pytest.approx(expected, rel=1e-6)
    assert expected > math.log(0.30)
    # After step 4 the best live hypothesis ("b c c" + another token, log P ≈ −6.1) is bounded by
    # −6.1 / lp(10) ≈ −3.5 < −0.943: stop, although the limit (10 tokens) is far.


def test_at_the_limit_only_ended_hypotheses_are_translations_under_the_bound():
    """With room for 3 tokens "b c c </s>" cannot end. transformers' rule (here "never", so that it
    reaches the limit) counts the cut "b c c" as finished, (log .35 + 2 log .95) / lp(3) = −0.970,
    and returns it; the paper's (tensor2tensor's) returns the best hypothesis that ended, "</s>"."""
    cut = run_scripted("early_stopping", max_new_tokens=3, early_stopping="never")
    assert cut.sequences.tolist() == [[1, B, C, C]]
    expected = (math.log(0.35) + 2 * math.log(0.95)) / gnmt_length_penalty(3, 0.6)
    assert float(cut.sequences_scores[0]) == pytest.approx(expected, rel=1e-6)
    ended = run_scripted("bound", max_new_tokens=3)
    assert ended.sequences.tolist() == [[1, EOS]]
    assert float(ended.sequences_scores[0]) == pytest.approx(math.log(0.30), rel=1e-6)


# ---- transformers' rules: exactly transformers' beam search -------------------------------------

CASES = [
    dict(early_stopping=True), dict(early_stopping=False), dict(early_stopping="never"),
    dict(early_stopping=True, num_return_sequences=3), dict(early_stopping="never", num_return_sequences=2),
    dict(early_stopping=True, min_new_tokens=4), dict(early_stopping=False, use_cache=False),
    dict(early_stopping=True, no_repeat_ngram_size=2, length_penalty=1.2),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("case", CASES, ids=lambda case: ",".join(f"{k}={v}" for k, v in case.items()))
def test_with_transformers_rules_it_is_transformers_beam_search(seed, case, calls):
    model = tiny_model(seed, eos_boost=1.5 + 0.2 * seed)
    ids, mask = padded_batch(seed)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=4, max_new_tokens=14, output_scores=True,
                  return_dict_in_generate=True, **{"length_penalty": 0.6, **case})
    theirs = model.generate(**kwargs, **TRANSFORMERS_BEAM_SEARCH)
    assert not calls
    ours = model.generate(**kwargs, **HF_RULES)
    assert len(calls) == 1
    assert torch.equal(ours.sequences, theirs.sequences)
    assert torch.equal(ours.sequences_scores, theirs.sequences_scores)
    assert torch.equal(ours.beam_indices, theirs.beam_indices)
    assert len(ours.scores) == len(theirs.scores)
    assert all(torch.equal(a, b) for a, b in zip(ours.scores, theirs.scores))
    # Without scores to return, done sentences leave the batch: the same tokens, fewer rows computed.
    plain = {k: v for k, v in kwargs.items() if k not in ("output_scores", "return_dict_in_generate")}
    assert torch.equal(model.generate(**plain, **HF_RULES), theirs.sequences)


@pytest.mark.slow
def test_with_transformers_rules_the_shipped_model_decodes_as_transformers(hub_card_model):
    from modeling_vaswani.training.data import multi30k_pairs

    model, tokenizer = hub_card_model
    sources, _ = multi30k_pairs("test", max_samples=30)
    encoded = tokenizer(sources, return_tensors="pt", padding=True)
    kwargs = dict(**encoded, num_beams=4, output_scores=True, return_dict_in_generate=True)
    theirs = model.generate(**kwargs, **TRANSFORMERS_BEAM_SEARCH)
    ours = model.generate(**kwargs, **HF_RULES)
    assert torch.equal(ours.sequences, theirs.sequences)
    assert torch.equal(ours.sequences_scores, theirs.sequences_scores)
    assert torch.equal(model.generate(**encoded, num_beams=4, **HF_RULES), theirs.sequences)


@pytest.fixture(scope="module")
def hub_card_model():
    from modeling_vaswani.evaluation.translation import load_translator

    folder = os.path.join(os.path.dirname(__file__), "..", "..", "hub_card")
    if not os.path.isfile(os.path.join(folder, "model.safetensors")):
        pytest.skip("hub_card/ holds no trained model")
    return load_translator(folder, device="cpu")


# ---- chosen by the generation config ------------------------------------------------------------

def test_new_models_decode_with_the_papers_search(tmp_path, calls):
    model = tiny_model()
    assert {k: getattr(model.generation_config, k) for k in PAPER} == PAPER == {
        k: PAPER_DECODING[k] for k in PAPER}
    ids, mask = padded_batch()
    paper = model.generate(input_ids=ids, attention_mask=mask)
    assert len(calls) == 1
    # Saved with generation_config.json, and chosen again after loading.
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "generation_config.json").read_text())
    assert {k: saved[k] for k in PAPER} == PAPER
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.generate(input_ids=ids, attention_mask=mask), paper)
    assert len(calls) == 2
    # The same search, asked for explicitly.
    assert torch.equal(model.generate(input_ids=ids, attention_mask=mask, **PAPER), paper)


def test_configs_without_the_entries_decode_with_transformers_beam_search(calls):
    model = tiny_model()
    ids, mask = padded_batch()
    theirs = model.generate(input_ids=ids, attention_mask=mask, **TRANSFORMERS_BEAM_SEARCH)
    for name in PAPER:  # a generation_config.json saved before the entries existed
        delattr(model.generation_config, name)
    assert torch.equal(model.generate(input_ids=ids, attention_mask=mask), theirs)
    assert not calls
    # On such a model the paper's search is one call argument away.
    assert not torch.equal(model.generate(input_ids=ids, attention_mask=mask, **PAPER), theirs)
    assert len(calls) == 1


def test_other_modes_are_transformers_own(calls):
    model = tiny_model()
    ids, mask = padded_batch()
    greedy = model.generate(input_ids=ids, attention_mask=mask, num_beams=1, max_new_tokens=8)
    assert torch.equal(greedy, model.generate(input_ids=ids, attention_mask=mask, num_beams=1, max_new_tokens=8,
                                              **TRANSFORMERS_BEAM_SEARCH))
    torch.manual_seed(0)
    sampled = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=8)
    torch.manual_seed(0)
    assert torch.equal(sampled, model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=8,
                                               **TRANSFORMERS_BEAM_SEARCH))
    assert not calls
    with pytest.raises(ValueError, match="beam_termination"):
        model.generate(input_ids=ids, beam_termination="soon")
    with pytest.raises(ValueError, match="length_penalty_formula"):
        model.generate(input_ids=ids, length_penalty_formula="wu")


def test_papers_search_handles_padding_limits_and_min_length():
    model = tiny_model()
    ids, mask = padded_batch()
    # A sentence alone and in a padded batch (the same limit): the same translation.
    batch = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12)
    alone = model.generate(input_ids=ids[3:4, :4], max_new_tokens=12)
    assert torch.equal(batch[3, :alone.shape[1]], alone[0])
    # max_new_tokens bounds the output; min_new_tokens keeps </s> away until then.
    assert model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=3).shape[1] <= 4
    longer = model.generate(input_ids=ids, attention_mask=mask, min_new_tokens=6, max_new_tokens=12)
    assert not (longer[:, 1:7] == EOS).any()
    # A sentence whose hypotheses never end: the best live one at the limit (input + 50 by default).
    endless = model.generate(input_ids=ids[:1], suppress_tokens=[EOS])
    assert endless.shape == (1, 1 + ids.shape[1] + 50) and EOS not in endless


# ---- custom_generate/generate.py travels with every checkpoint -----------------------------------

CHILD = """
import sys; sys.modules["modeling_vaswani"] = None  # this package must not be importable here
import json, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
ids, mask = (torch.tensor(x) for x in json.loads(sys.argv[2]))
out = model.generate(input_ids=ids, attention_mask=mask, output_scores=True, return_dict_in_generate=True)
print(json.dumps(dict(
    generate=getattr(model.generate, "func", model.generate).__module__,
    paper=[out.sequences.tolist(), out.sequences_scores.tolist()],
    transformers=model.generate(input_ids=ids, attention_mask=mask, length_penalty_formula=None,
                                beam_termination=None).tolist(),
    imported=[name for name, module in sys.modules.items() if name.startswith("modeling_vaswani") and module],
)))
"""


@pytest.mark.slow
def test_saved_folder_decodes_with_the_papers_search_without_the_package(tmp_path):
    model = tiny_model()
    ids, mask = padded_batch()
    model.save_pretrained(tmp_path / "saved")
    source = search.__file__
    assert (tmp_path / "saved" / CUSTOM_GENERATE_FILE).read_bytes() == open(source, "rb").read()
    folder = shutil.copytree(tmp_path / "saved", tmp_path / "elsewhere" / "copied")
    paper = model.generate(input_ids=ids, attention_mask=mask, output_scores=True, return_dict_in_generate=True)
    theirs = model.generate(input_ids=ids, attention_mask=mask, **TRANSFORMERS_BEAM_SEARCH)
    assert not torch.equal(paper.sequences[:, :theirs.shape[1]], theirs)  # the two searches differ here

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    # -I: isolated mode, neither the working directory nor PYTHONPATH nor user site-packages on sys.path.
    arguments = [str(folder), json.dumps([ids.tolist(), mask.tolist()])]
    completed = subprocess.run([sys.executable, "-I", "-c", CHILD, *arguments], cwd=tmp_path / "elsewhere", env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["imported"] == []
    assert report["generate"].startswith("transformers_modules.") and report["generate"].endswith(
        "custom_generate.generate")
    assert report["paper"] == [paper.sequences.tolist(), paper.sequences_scores.tolist()]
    assert report["transformers"] == theirs.tolist()
