"""A saved folder works with `trust_remote_code=True` where this package is absent."""

import shutil
from types import SimpleNamespace

import pytest
import torch

from checks import run_without_package
from modeling_vaswani.model.loading import CUSTOM_GENERATE_SOURCE

SENTENCE = "A man is riding a bicycle."

# Run where the package cannot be imported (checks.run_without_package).
CHILD = f"""
import torch
from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

folder = sys.argv[1]
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
base = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
# The tokenizer's loader reads config.json, whose auto_map also points at the folder's code.
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
inputs = tokenizer([{SENTENCE!r}, "Two dogs."], return_tensors="pt", padding=True)
paper = model.generate(**inputs, max_new_tokens=6, output_scores=True, return_dict_in_generate=True)
translator = pipeline("translation", model=folder, trust_remote_code=True)
report = dict(
    classes=[type(m).__name__ for m in (model, base)],
    modules=[type(m).__module__ for m in (model, base)],
    generate=getattr(model.generate, "func", model.generate).__module__,
    hidden=base(**inputs, decoder_input_ids=torch.tensor([[1, 5, 6]] * 2)).last_hidden_state.tolist(),
    paper=[paper.sequences.tolist(), paper.sequences_scores.tolist()],
    transformers=model.generate(**inputs, max_new_tokens=6, length_penalty_formula=None,
                                beam_termination=None).tolist(),
    greedy=model.generate(**inputs, num_beams=1, max_new_tokens=5).tolist(),
    pipeline_class=type(translator).__name__,
    result=translator({SENTENCE!r}, num_beams=1, max_new_tokens=5),
)
"""


@pytest.mark.slow
def test_loads_translates_and_searches_as_the_paper_without_the_package(saved_model_dir, translation_model, tokenizer,
                                                                        tmp_path):
    folder = shutil.copytree(saved_model_dir, tmp_path / "elsewhere" / "copied")
    report = run_without_package(CHILD, folder, tmp_path, cwd=tmp_path / "elsewhere", isolated=True)
    assert str(saved_model_dir.parent) not in report["stdout"]
    assert report["classes"] == ["VaswaniForConditionalGeneration", "VaswaniModel"]
    assert all(module.startswith("transformers_modules.") for module in report["modules"])  # the folder's code
    assert report["generate"].startswith("transformers_modules.") and report["generate"].endswith(
        "custom_generate.generate")  # transformers loaded the folder's custom_generate
    inputs = tokenizer([SENTENCE, "Two dogs."], return_tensors="pt", padding=True)
    expected = translation_model.model(**inputs, decoder_input_ids=torch.tensor([[1, 5, 6]] * 2)).last_hidden_state
    torch.testing.assert_close(torch.tensor(report["hidden"]), expected, rtol=0, atol=1e-6)
    paper = translation_model.generate(**inputs, max_new_tokens=6, output_scores=True, return_dict_in_generate=True)
    assert report["paper"] == [paper.sequences.tolist(), paper.sequences_scores.tolist()]
    assert report["transformers"] == translation_model.generate(**inputs, max_new_tokens=6, length_penalty_formula=None,
                                                                beam_termination=None).tolist()
    assert report["greedy"] == translation_model.generate(**inputs, num_beams=1, max_new_tokens=5).tolist()
    assert report["pipeline_class"] == "VaswaniTranslationPipeline"
    assert [list(row) for row in report["result"]] == [["translation_text"]]


def test_custom_generate_hands_over_to_the_models_own_generate_only(make_model, load_module):
    module = load_module(CUSTOM_GENERATE_SOURCE)
    model = make_model()
    ids, mask = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    assert torch.equal(module.generate(input_ids=ids, attention_mask=mask, model=model),
                       model.generate(input_ids=ids, attention_mask=mask))
    with pytest.raises(TypeError, match="SimpleNamespace"):
        module.generate(input_ids=ids, model=SimpleNamespace())
