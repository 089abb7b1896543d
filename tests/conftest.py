"""Shared fixtures; copy the session-wide ones (trained_tokenizer, saved_model_dir) before changing them."""

import copy
import importlib.util
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest
import torch

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

# d_model 16 = 4 heads of d_k 4, two layers per stack, 40 token ids (0–3 special); no dropout, so a
# model in training mode computes what it computes in eval mode.
TINY_CONFIG = dict(vocab_size=40, d_model=16, d_ff=32, num_heads=4, num_layers=2, dropout=0.0)
MULTI30K_PAIRS = 150  # 300 sentences, both languages
TOKENIZER_VOCAB = 300

if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker per core (setup.cfg): more threads would fight for them
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def make_config():
    """make_config(preset=None, **overrides): TINY_CONFIG, or a named preset, with overrides."""
    def make(preset=None, **overrides):
        return VaswaniConfig(**{**TINY_CONFIG, **overrides}) if preset is None else VaswaniConfig.from_preset(
            preset, **overrides)

    return make


@pytest.fixture(scope="session")
def make_model(make_config):
    """make_model(seed=0, preset=None, **overrides): a new seeded model of make_config(...) in eval mode; one
    asked for twice is kept and deep-copied after, the torch RNG left as building leaves it."""
    asked, kept = set(), {}

    def make(seed=0, preset=None, **overrides):
        key = repr((seed, preset, sorted(overrides.items())))
        if key in kept:
            torch.set_rng_state(kept[key][1])
            return copy.deepcopy(kept[key][0])
        torch.manual_seed(seed)
        model = VaswaniForConditionalGeneration(make_config(preset, **overrides)).eval()
        if key in asked:
            kept[key] = (copy.deepcopy(model), torch.get_rng_state())
        asked.add(key)
        return model

    return make


@pytest.fixture
def tiny_model(make_model):
    return make_model()


@pytest.fixture
def torch_threads():
    """Put PyTorch's thread count back after a test that sets it."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def multi30k_sample():
    """The first MULTI30K_PAIRS en–de pairs of Multi30k's training split."""
    from modeling_vaswani.training.data import load_multi30k, select_first  # tests without data skip the import

    return select_first(load_multi30k("en", "de")["train"], MULTI30K_PAIRS)


@pytest.fixture(scope="session")
def trained_tokenizer(multi30k_sample):
    """A BPE vocabulary of both sides of multi30k_sample, one for the session: read only."""
    from modeling_vaswani.training.tokenization import train_tokenizer_for_dataset

    return train_tokenizer_for_dataset(multi30k_sample, "en", "de", vocab_size=TOKENIZER_VOCAB)


@pytest.fixture
def tokenizer(trained_tokenizer):
    return copy.deepcopy(trained_tokenizer)


@pytest.fixture
def translation_model(make_model, trained_tokenizer):
    """An untrained tiny model (seed 0) over the tokenizer's vocabulary."""
    return make_model(vocab_size=len(trained_tokenizer))


@pytest.fixture(scope="session")
def saved_model_dir(tmp_path_factory, make_model, trained_tokenizer) -> Path:
    """translation_model and the tokenizer, saved with save_pretrained."""
    path = tmp_path_factory.mktemp("saved_model") / "tiny-vaswani"
    make_model(vocab_size=len(trained_tokenizer)).save_pretrained(path)
    trained_tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def folder(saved_model_dir, tmp_path):
    """A copy of saved_model_dir of the test's own."""
    return Path(shutil.copytree(saved_model_dir, tmp_path / "copy"))


@pytest.fixture
def no_network(monkeypatch):
    """Every connection refused; the attempts (host and port, or name) recorded."""
    attempts = []

    def refused(*args, **kwargs):
        attempts.append(args[1:2] or args[:1])
        raise OSError("network access attempted")

    for target, name in ((socket.socket, "connect"), (socket.socket, "connect_ex"), (socket, "create_connection"),
                         (socket, "getaddrinfo")):
        monkeypatch.setattr(target, name, refused)
    return attempts


@pytest.fixture(scope="session")
def load_module():
    """load_module(path, name=None): a Python file (a script, an example) run as a module of its own."""

    def load(path, name=None):
        spec = importlib.util.spec_from_file_location(name or f"{Path(path).stem}_under_test", path)
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
        spec.loader.exec_module(module)
        return module

    return load

