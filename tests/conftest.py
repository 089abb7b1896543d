"""Shared test fixtures: tiny configs and models, one small BPE vocabulary, a saved model folder.

The costly things (the tokenizer, the saved folder, a model asked for again) are made once per
session. What a test may change (configs, models, tokenizers) reaches it as an object of its own;
what is shared as one object (trained_tokenizer, for session- and module-scoped fixtures, and
saved_model_dir) is only read: copy it before changing it.

    make_config(preset=None, **overrides)        a VaswaniConfig: TINY_CONFIG (or a preset) + overrides
    make_model(seed=0, preset=None, **overrides)  a seeded model in eval mode, a fresh copy on every call
    tiny_config, tiny_model                      make_config(), make_model()
    multi30k_sample                              the first 150 en–de Multi30k training pairs
    trained_tokenizer / tokenizer                BPE (300 tokens) trained once on those 300 sentences;
                                                 shared and read-only / a private copy for one test
    translation_model                            a tiny model whose vocabulary is the tokenizer's
    saved_model_dir                              translation_model + tokenizer, via save_pretrained
    repo_root, model_code_dir                    the checkout, and modeling_vaswani/model/
    load_module(path)                            a script (examples/, metrics) imported as a module
"""

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import modeling_vaswani.model
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

REPO_ROOT = Path(__file__).resolve().parents[1]

# d_model 16 = 4 heads of d_k 4, two layers per stack, 40 token ids (0–3 special); no dropout, so a
# model in training mode computes what it computes in eval mode.
TINY_CONFIG = dict(vocab_size=40, d_model=16, d_ff=32, num_heads=4, num_layers=2, dropout=0.0)

MULTI30K_PAIRS = 150  # 300 sentences, both languages
TOKENIZER_VOCAB = 300


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def model_code_dir() -> Path:
    """modeling_vaswani/model/: exactly the code a saved model folder ships."""
    return Path(modeling_vaswani.model.__file__).parent


@pytest.fixture(scope="session")
def make_config():
    """make_config(preset=None, **overrides): TINY_CONFIG, or a named preset, with overrides."""

    def make(preset=None, **overrides):
        if preset is not None:
            return VaswaniConfig.from_preset(preset, **overrides)
        return VaswaniConfig(**{**TINY_CONFIG, **overrides})

    return make


@pytest.fixture(scope="session")
def make_model(make_config):
    """make_model(seed=0, preset=None, **overrides): torch.manual_seed(seed), then a model of
    make_config(preset, **overrides), in eval mode.

    Every call returns a model of its own, so tests may train, cast or reconfigure what they get.
    A model asked for more than once is built once more and kept; later calls get deep copies of
    it (tied weights stay tied), which is cheaper than building. The global torch RNG is left as
    building the model leaves it, whether the model was built or copied.
    """
    asked, kept = set(), {}

    def build(seed, preset, overrides):
        torch.manual_seed(seed)
        return VaswaniForConditionalGeneration(make_config(preset, **overrides)).eval()

    def make(seed=0, preset=None, **overrides):
        try:
            key = (seed, preset, tuple(sorted(overrides.items())))
            hash(key)
        except TypeError:  # an unhashable override: nothing to keep
            return build(seed, preset, overrides)
        if key in kept:
            model, rng_state = kept[key]
            torch.set_rng_state(rng_state)
            return copy.deepcopy(model)
        model = build(seed, preset, overrides)
        if key in asked:
            kept[key] = (copy.deepcopy(model), torch.get_rng_state())
        asked.add(key)
        return model

    return make


@pytest.fixture
def tiny_config(make_config):
    return make_config()


@pytest.fixture
def tiny_model(make_model):
    return make_model()


@pytest.fixture(scope="session")
def multi30k_sample():
    """The first MULTI30K_PAIRS en–de pairs of the Multi30k training split (a datasets.Dataset)."""
    # Imported here, not above: tests that need no data do not depend on the training package.
    from modeling_vaswani.training.data import load_multi30k, select_first

    return select_first(load_multi30k("en", "de")["train"], MULTI30K_PAIRS)


@pytest.fixture(scope="session")
def trained_tokenizer(multi30k_sample):
    """The shared BPE vocabulary of both sides of multi30k_sample; one object for the session: read only."""
    from modeling_vaswani.training.tokenization import train_tokenizer_for_dataset

    return train_tokenizer_for_dataset(multi30k_sample, "en", "de", vocab_size=TOKENIZER_VOCAB)


@pytest.fixture
def tokenizer(trained_tokenizer):
    """trained_tokenizer, copied for one test."""
    return copy.deepcopy(trained_tokenizer)


@pytest.fixture
def translation_model(make_model, trained_tokenizer):
    """An untrained tiny model (seed 0) over the tokenizer's vocabulary."""
    return make_model(vocab_size=len(trained_tokenizer))


@pytest.fixture(scope="session")
def saved_model_dir(tmp_path_factory, make_model, trained_tokenizer) -> Path:
    """translation_model and the tokenizer saved with save_pretrained; shared: copy it before changing it."""
    path = tmp_path_factory.mktemp("saved_model") / "tiny-vaswani"
    make_model(vocab_size=len(trained_tokenizer)).save_pretrained(path)
    trained_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def load_module():
    """load_module(path, name=None): run a Python file as a module of its own, e.g. an example script."""

    def load(path, name=None):
        path = Path(path)
        spec = importlib.util.spec_from_file_location(name or f"{path.stem}_under_test", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
        spec.loader.exec_module(module)
        return module

    return load
