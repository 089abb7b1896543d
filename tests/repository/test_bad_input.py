"""A catalogue of wrong inputs: each must end in a clear error that names what was wrong.

Configs of other models, token ids outside the vocabulary, malformed batches, odd decoding
settings, unusual text, broken data files, damaged model folders and misused command lines.
Every case asserts the exception type (or the exit code) and that the message names the
offending field, id, file or line; where the library instead produces a sensible result, the
test says so and checks the result.
"""

import importlib.util
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import BertConfig

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.training.checkpoint_averaging import CheckpointMismatchError, average_checkpoints
from modeling_vaswani.training.data import DEFAULT_DATA_DIR, DataError, load_translation_dataset, read_lines
from modeling_vaswani.training.tokenization import UNK_ID, train_bpe_tokenizer
from modeling_vaswani.evaluation.translation import translate

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
TINY = dict(d_model=16, d_ff=32, num_heads=2, num_layers=1, dropout=0.0)


def tiny_model(vocab_size=40, **overrides):
    torch.manual_seed(0)
    config = VaswaniConfig.from_preset("tiny", vocab_size=vocab_size, **{**TINY, **overrides})
    return VaswaniForConditionalGeneration(config).eval()


@pytest.fixture(scope="module")
def tokenizer():
    english = read_lines(DEFAULT_DATA_DIR / "train.en.gz")[:300]
    german = read_lines(DEFAULT_DATA_DIR / "train.de.gz")[:300]
    return train_bpe_tokenizer(english + german, vocab_size=250)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    """A complete tiny model folder: weights, config, generation config, code and tokenizer."""
    folder = tmp_path_factory.mktemp("model") / "tiny"
    tiny_model(vocab_size=len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def copy_model(model_dir, tmp_path, name="copy"):
    return Path(shutil.copytree(model_dir, tmp_path / name))


# --- configs -----------------------------------------------------------------------------------


@pytest.fixture
def bert_dir(tmp_path):
    BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32).save_pretrained(tmp_path / "bert")
    return tmp_path / "bert"


@pytest.mark.parametrize("loader", [VaswaniConfig.from_pretrained, VaswaniForConditionalGeneration.from_pretrained],
                         ids=["config", "model"])
def test_config_of_another_model_type_is_refused(bert_dir, loader):
    # Hugging Face only warns and builds a Transformer from the fields that happen to share a name.
    with pytest.raises(ValueError, match=r"model_type 'bert', not 'vaswani'") as error:
        loader(bert_dir)
    assert str(bert_dir) in str(error.value)


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match=r"Unknown preset 'huge'.*'base', 'big', 'small', 'tiny'"):
        VaswaniConfig.from_preset("huge")


def test_folder_without_config_json_is_refused(model_dir, tmp_path):
    # Hugging Face would quietly build the default (base-sized) config instead.
    folder = copy_model(model_dir, tmp_path)
    (folder / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="No config.json") as error:
        VaswaniConfig.from_pretrained(folder)
    assert str(folder) in str(error.value)
    with pytest.raises(FileNotFoundError, match="No config.json"):
        VaswaniForConditionalGeneration.from_pretrained(folder)


def test_config_json_that_is_not_json_names_the_file(model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    (folder / "config.json").write_text('{"model_type": "vas')
    with pytest.raises(ValueError, match="not valid JSON") as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert str(folder / "config.json") in str(error.value)


# --- model inputs ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", [40, 41, 1000, -1])
def test_source_id_outside_vocabulary(bad_id):
    model = tiny_model(vocab_size=40)
    with pytest.raises(ValueError, match=rf"Token id {bad_id} is outside the vocabulary \(vocab_size=40\)"):
        model(input_ids=torch.tensor([[5, bad_id, 2]]), decoder_input_ids=torch.tensor([[1]]))


def test_target_id_outside_vocabulary():
    model = tiny_model(vocab_size=40)
    with pytest.raises(ValueError, match=r"Token id 77 is outside the vocabulary \(vocab_size=40\)"):
        model(input_ids=torch.tensor([[5, 2]]), decoder_input_ids=torch.tensor([[1, 77]]))


def test_generate_with_id_outside_vocabulary():
    with pytest.raises(ValueError, match=r"Token id 40 .*vocab_size=40"):
        tiny_model(vocab_size=40).generate(input_ids=torch.tensor([[40, 2]]), max_new_tokens=2)


@pytest.mark.parametrize(
    "input_ids,message",
    [
        (torch.tensor([5, 6, 2]), r"input_ids must have shape \(batch, length\), got \(3,\)"),
        (torch.tensor([[5.0, 6.0]]), r"input_ids must hold integer token ids, got dtype torch.float32"),
        (torch.zeros(0, 3, dtype=torch.long), r"input_ids holds an empty batch"),
        (torch.zeros(2, 0, dtype=torch.long), r"input_ids has sequences of length 0"),
    ],
    ids=["1-d", "float", "empty-batch", "zero-length"],
)
@pytest.mark.parametrize("entry", ["forward", "generate"])
def test_malformed_source_batch(input_ids, message, entry):
    model = tiny_model()
    with pytest.raises(ValueError, match=message):
        if entry == "forward":
            model(input_ids=input_ids, decoder_input_ids=torch.ones(max(len(input_ids), 1), 1, dtype=torch.long))
        else:
            model.generate(input_ids=input_ids, max_new_tokens=2)


def test_zero_length_target_is_refused():
    # Without the check the model returns empty logits and a loss of nothing.
    with pytest.raises(ValueError, match="decoder_input_ids has sequences of length 0"):
        tiny_model()(input_ids=torch.tensor([[5, 2]]), decoder_input_ids=torch.zeros(1, 0, dtype=torch.long))


@pytest.mark.parametrize("entry", ["forward", "generate"])
def test_attention_mask_of_wrong_shape(entry):
    model = tiny_model()
    ids, mask = torch.tensor([[5, 6, 7, 2]]), torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"attention_mask has shape \(1, 3\) but input_ids has \(1, 4\)"):
        if entry == "forward":
            model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.tensor([[1]]))
        else:
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=2)


def test_longer_than_max_positions_with_sinusoids_extrapolates():
    # §3.5: the sinusoids may let the model extrapolate; the table grows instead of failing.
    model = tiny_model(max_position_embeddings=16)
    ids = torch.randint(4, 40, (2, 50))
    logits = model(input_ids=ids, decoder_input_ids=torch.randint(4, 40, (2, 30))).logits
    assert logits.shape == (2, 30, 40) and torch.isfinite(logits).all()


@pytest.mark.parametrize("side", ["source", "target"])
def test_longer_than_max_positions_with_learned_positions_is_refused(side):
    model = tiny_model(positional_encoding="learned", max_position_embeddings=16)
    source = torch.randint(4, 40, (1, 20 if side == "source" else 5))
    target = torch.randint(4, 40, (1, 20 if side == "target" else 5))
    with pytest.raises(ValueError, match=r"position 19 is beyond max_position_embeddings=16"):
        model(input_ids=source, decoder_input_ids=target)


def test_generation_running_past_learned_positions_is_refused():
    model = tiny_model(positional_encoding="learned", max_position_embeddings=8)
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model.generate(input_ids=torch.tensor([[5, 6, 2]]), max_new_tokens=20, num_beams=1,
                       eos_token_id=None)  # no early end: decoding must reach position 8


# --- generation --------------------------------------------------------------------------------


def test_more_beams_than_vocabulary_gives_a_sensible_output():
    # transformers accepts it (beams past the vocabulary simply hold low-scoring hypotheses).
    model = tiny_model(vocab_size=12)
    output = model.generate(input_ids=torch.tensor([[5, 6, 2]]), num_beams=20, num_return_sequences=20,
                            max_new_tokens=3)
    assert output.shape[0] == 20 and output.shape[1] <= 4
    assert (output[:, 0] == model.config.decoder_start_token_id).all()
    assert ((output >= 0) & (output < 12)).all()


@pytest.mark.parametrize("value", [0, -1])
def test_max_new_tokens_below_one_is_an_error(value):
    with pytest.raises(ValueError, match=rf"max_new_tokens must be a positive integer.*got {value}"):
        tiny_model().generate(input_ids=torch.tensor([[5, 2]]), max_new_tokens=value)


def test_missing_decoder_start_falls_back_to_bos():
    # transformers starts the decoder with bos_token_id when decoder_start_token_id is unset.
    model = tiny_model(decoder_start_token_id=None)
    assert model.generation_config.decoder_start_token_id is None
    output = model.generate(input_ids=torch.tensor([[5, 6, 2]]), num_beams=1, max_new_tokens=4)
    assert (output[:, 0] == model.config.bos_token_id).all()
    reference = tiny_model(decoder_start_token_id=model.config.bos_token_id)
    assert torch.equal(output, reference.generate(input_ids=torch.tensor([[5, 6, 2]]), num_beams=1, max_new_tokens=4))


def test_missing_decoder_start_and_bos_is_an_error():
    model = tiny_model(decoder_start_token_id=None, bos_token_id=None)
    with pytest.raises(ValueError, match="`decoder_start_token_id` or `bos_token_id` has to be defined"):
        model.generate(input_ids=torch.tensor([[5, 2]]), num_beams=1, max_new_tokens=2)


# --- tokenizer and text ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def translator(model_dir, tokenizer):
    return VaswaniForConditionalGeneration.from_pretrained(model_dir), tokenizer


def test_empty_and_whitespace_lines_give_empty_translations(translator):
    model, tokenizer = translator
    outputs = translate(model, tokenizer, ["", "A dog runs.", "   ", "\t", "Two men."], num_beams=1, max_new_tokens=3)
    assert len(outputs) == 5
    assert outputs[0] == outputs[2] == outputs[3] == ""
    assert all(isinstance(text, str) for text in outputs)


def test_very_long_line_is_truncated_to_max_source_length(tokenizer):
    # Learned positions fail past 64 tokens, so success proves the 5,000-word line was cut.
    model = tiny_model(vocab_size=len(tokenizer), positional_encoding="learned", max_position_embeddings=64)
    line = " ".join(["dog"] * 5000)
    assert len(tokenizer(line)["input_ids"]) > 5000
    [output] = translate(model, tokenizer, [line], max_source_length=32, num_beams=1, max_new_tokens=3)
    assert isinstance(output, str)


@pytest.mark.parametrize("sentences,message", [
    (["fine", 3], "Sentence 1 is a int, not a string"),
    ([None], "Sentence 0 is a NoneType, not a string"),
    ("A single string", "not a single string"),
])
def test_non_string_input_to_translate(translator, sentences, message):
    model, tokenizer = translator
    with pytest.raises(ValueError, match=message):
        translate(model, tokenizer, sentences, num_beams=1, max_new_tokens=2)


def test_unseen_characters_become_unk_not_a_crash(tokenizer):
    ids = tokenizer("猫 🐈")["input_ids"]
    assert UNK_ID in ids
    assert "🐈" not in tokenizer.decode(ids, skip_special_tokens=True)


ODD_TEXT = [
    "Ein Hund 🐕 läuft über die Wiese.",
    "一只狗在雪地里奔跑。",
    "كلب يجري في الثلج",
    "Ζώο τρέχει — «εδώ» 🏃‍♀️🏽",
    "e\u0301 combining, zero\u200bwidth, ＦＵＬＬＷＩＤＴＨ",
    "🙂🙃🙂",
]


def run_script(*args, timeout=300):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONIOENCODING="utf-8", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, encoding="utf-8",
                          env=env, timeout=timeout)


@pytest.mark.slow
def test_mixed_scripts_and_emoji_through_translate_script(model_dir):
    result = run_script(SCRIPTS / "translate.py", "--model", model_dir, "--num_beams", "1", "--max_new_tokens", "4",
                        *ODD_TEXT)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stdout.split("\n")) == len(ODD_TEXT) + 1  # one line per input, then the final newline


# --- data --------------------------------------------------------------------------------------


def write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@pytest.mark.parametrize(
    "source,target,message",
    [
        (None, "a\nb\n", r"Data file not found: {src}"),
        ("a\nb\nc\n", "a\nb\n", r"{src} has 3 lines, {tgt} has 2"),
        ("", "", r"Empty corpus: {src}"),
        (b"good\nfine\n\xff\xfe bad\n", "a\nb\nc\n", r"{src}, line 3: not valid UTF-8"),
        ("a\nb\n", b"ok\n\xc3\x28\n", r"{tgt}, line 2: not valid UTF-8"),
    ],
    ids=["missing", "different-lengths", "empty", "undecodable-source", "undecodable-target"],
)
def test_bad_parallel_files(tmp_path, source, target, message):
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    if source is not None:
        write(src, source)
    write(tgt, target)
    with pytest.raises(DataError, match=message.format(src=str(src), tgt=str(tgt))):
        load_translation_dataset("en", "de", train_files=(src, tgt))


def test_gz_file_that_is_not_gzip_names_the_file(tmp_path):
    fake = write(tmp_path / "train.en.gz", "plain text, not gzip\n")
    with pytest.raises(DataError, match=f"Could not read {fake}"):
        load_translation_dataset("en", "de", train_files=(fake, fake))


@pytest.mark.slow
def test_train_script_reports_undecodable_data_in_one_line(tmp_path):
    src = write(tmp_path / "train.en", b"A dog.\nA cat.\n\x80\x81 broken\n")
    tgt = write(tmp_path / "train.de", "Ein Hund.\nEine Katze.\nkaputt\n")
    result = run_script(SCRIPTS / "train.py", "--train_source", src, "--train_target", tgt,
                        "--output_dir", tmp_path / "out", "--report_to", "none")
    assert_one_line_error(result.returncode, result.stderr, f"{src}, line 3: not valid UTF-8")


# --- model folders and checkpoints -------------------------------------------------------------


def test_folder_without_weights(model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="has no model.safetensors") as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert str(folder) in str(error.value)


@pytest.mark.parametrize("damage", ["truncated", "random-bytes", "empty"])
def test_damaged_weights_file_names_the_file(model_dir, tmp_path, damage):
    folder = copy_model(model_dir, tmp_path)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    damaged = {"truncated": data[: len(data) // 2], "random-bytes": os.urandom(len(data)), "empty": b""}[damage]
    weights.write_bytes(damaged)
    with pytest.raises(ValueError, match="truncated or corrupted") as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert str(weights) in str(error.value)


def test_weights_that_do_not_match_config_json(model_dir, tmp_path):
    # d_ff 32 in the weights, 48 in config.json: Hugging Face's report only goes to the log.
    folder = copy_model(model_dir, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "d_ff": 48}))
    expected = "tensor 'model.decoder.layers.0.feed_forward.linear_1.bias' has shape (32,) in the file but (48,)"
    with pytest.raises(ValueError, match=re.escape(expected)):
        VaswaniForConditionalGeneration.from_pretrained(folder)
    # Asked for explicitly, the mismatched tensors are re-initialised as in transformers.
    model = VaswaniForConditionalGeneration.from_pretrained(folder, ignore_mismatched_sizes=True)
    assert model.config.d_ff == 48


def test_weights_that_cover_only_part_of_the_model(model_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = copy_model(model_dir, tmp_path)
    tensors = load_file(folder / "model.safetensors")
    dropped = sorted(tensors)[0]
    del tensors[dropped]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=rf"lack 1 of the model's tensors \(first: '{dropped}'\)"):
        VaswaniForConditionalGeneration.from_pretrained(folder)


@pytest.mark.parametrize("difference", [{"d_ff": 48}, {"positional_encoding": "learned"}], ids=["d_ff", "learned"])
def test_averaging_checkpoints_of_different_models(model_dir, tmp_path, difference):
    other = tmp_path / "other"
    tiny_model(vocab_size=json.loads((model_dir / "config.json").read_text())["vocab_size"],
               **difference).save_pretrained(other)
    # A differing config field is named; so is a tensor only one of them has.
    expected = "d_ff" if "d_ff" in difference else "embed_positions.weight"
    with pytest.raises(CheckpointMismatchError, match=expected):
        average_checkpoints([model_dir, other], tmp_path / "averaged")
    assert not (tmp_path / "averaged" / "model.safetensors").exists()


# --- command-line misuse -----------------------------------------------------------------------


def run_in_process(monkeypatch, capsys, script, *args):
    """Run a script as `python scripts/<script> args` would, in this process (saves a start-up each)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / script), *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(SCRIPTS / script), run_name="__main__")
    err = capsys.readouterr().err
    return stop.value.code, err


# Each script with its required flags, so that only the flag under test is wrong.
REQUIRED_FLAGS = {
    "train.py": [],
    "evaluate_model.py": ["--model", "m"],
    "translate.py": [],
    "average_checkpoints.py": ["--checkpoints", "a", "--output_dir", "out"],
    "push_to_hub.py": ["--model_dir", "m", "--repo_id", "user/name"],
}
SCRIPT_NAMES = list(REQUIRED_FLAGS)


def test_no_script_shadows_an_installed_module():
    """`python scripts/x.py` puts scripts/ first on sys.path: a script named like a library (say
    evaluate.py) would be imported in place of that library by every script in the folder."""
    assert sys.path[0] != str(SCRIPTS)
    tests = SCRIPTS.parent / "tests"

    def installed(name):  # not a test folder such as tests/benchmarks/table3 (pytest puts tests/ on sys.path)
        spec = importlib.util.find_spec(name)
        return spec is not None and not all(Path(place).is_relative_to(tests)
                                            for place in spec.submodule_search_locations or [spec.origin or ""])

    shadowing = [p.name for p in SCRIPTS.glob("*.py") if installed(p.stem)]
    assert not shadowing, f"rename {shadowing}: each hides the installed module of the same name"


def assert_one_line_error(code, err, *names):
    assert code not in (0, None)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for name in names:
        assert str(name) in lines[0], (name, lines[0])


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_unknown_flag(monkeypatch, capsys, script):
    code, err = run_in_process(monkeypatch, capsys, script, *REQUIRED_FLAGS[script], "--no_such_flag", "3")
    assert_one_line_error(code, err, "--no_such_flag")


@pytest.mark.parametrize(
    "script,args",
    [
        ("train.py", ["--model_name_or_path", "{missing}"]),
        ("evaluate_model.py", ["--model", "{missing}"]),
        ("translate.py", ["--model", "{missing}", "Hello"]),
        ("average_checkpoints.py", ["--run_dir", "{missing}", "--output_dir", "{tmp}/out"]),
        ("push_to_hub.py", ["--model_dir", "{missing}", "--repo_id", "user/name", "--dry_run"]),
    ],
    ids=SCRIPT_NAMES,
)
def test_missing_model(monkeypatch, capsys, tmp_path, script, args):
    missing = tmp_path / "no_such_model"
    code, err = run_in_process(monkeypatch, capsys, script, *[a.format(missing=missing, tmp=tmp_path) for a in args])
    assert_one_line_error(code, err, missing)


def test_translate_script_with_a_broken_model_folder(monkeypatch, capsys, model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    (folder / "model.safetensors").write_bytes(b"\x00" * 100)
    code, err = run_in_process(monkeypatch, capsys, "translate.py", "--model", folder, "Hello")
    assert_one_line_error(code, err, folder / "model.safetensors", "truncated or corrupted")


@pytest.mark.parametrize("script", ["train.py", "evaluate_model.py"])
def test_wrong_language_code(monkeypatch, capsys, model_dir, tmp_path, script):
    args = ["--source_lang", "xx", "--output_dir", tmp_path / "out"]
    if script == "evaluate_model.py":
        args += ["--model", model_dir]
    code, err = run_in_process(monkeypatch, capsys, script, *args)
    assert_one_line_error(code, err, "source_lang='xx' is not available")


@pytest.mark.parametrize("script,flag", [("train.py", "--num_train_epochs"), ("translate.py", "--batch_size"),
                                         ("evaluate_model.py", "--num_beams")])
def test_flag_value_of_wrong_type(monkeypatch, capsys, script, flag):
    code, err = run_in_process(monkeypatch, capsys, script, *REQUIRED_FLAGS[script], flag, "many")
    assert_one_line_error(code, err, flag, "many")


# === classes of bad input, each a table ========================================================
#
# Each class below is one kind of mistake; its table lists the spellings of it seen or expected.
# A case passes when the input is refused with a message that names what was wrong (or, where
# the input is legitimate, when the result is right).


def assert_error_line(code, err, *names):
    """Exit status 2, no traceback, and one `error: ...` line (the last), naming `names`. Progress
    bars and transformers' own log lines may come before it."""
    assert code == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err
    for name in names:
        assert str(name) in errors[0], (name, errors[0])


def edit_json(path, **changes):
    values = json.loads(path.read_text(encoding="utf-8"))
    values.update(changes)
    path.write_text(json.dumps({k: v for k, v in values.items() if v is not _DELETE}), encoding="utf-8")


_DELETE = object()


# --- flag values out of range ------------------------------------------------------------------

BAD_FLAG_VALUES = [
    ("translate.py", ["--num_beams", "0"], "--num_beams"),
    ("translate.py", ["--num_beams", "-2"], "--num_beams"),
    ("translate.py", ["--max_new_tokens", "0"], "--max_new_tokens"),
    ("translate.py", ["--batch_size", "0"], "--batch_size"),
    ("evaluate_model.py", ["--model", "m", "--num_beams", "0"], "--num_beams"),
    ("evaluate_model.py", ["--model", "m", "--num_beams", "-2"], "--num_beams"),
    ("evaluate_model.py", ["--model", "m", "--max_samples", "-1"], "--max_samples"),
    ("evaluate_model.py", ["--model", "m", "--max_new_tokens", "0"], "--max_new_tokens"),
    ("evaluate_model.py", ["--model", "m", "--batch_size", "-3"], "--batch_size"),
    ("collect_results.py", ["--run_dir", "r", "--batch_size", "0"], "--batch_size"),
]


@pytest.mark.parametrize("script,args,flag", BAD_FLAG_VALUES, ids=[f"{s}{' '.join(a)}" for s, a, _ in BAD_FLAG_VALUES])
def test_flag_value_out_of_range(monkeypatch, capsys, script, args, flag):
    code, err = run_in_process(monkeypatch, capsys, script, *args)
    assert_one_line_error(code, err, flag, "expected a positive integer")


# --- devices that do not exist ------------------------------------------------------------------

BAD_DEVICES = {
    "tpu9": "is not a device name",
    "gpu": "is not a device name",
    "cuda:99": "is not available here",
    "meta": "holds no data",
}


@pytest.mark.parametrize("device", list(BAD_DEVICES))
def test_device_that_does_not_exist(monkeypatch, capsys, model_dir, device):
    code, err = run_in_process(monkeypatch, capsys, "translate.py", "--model", model_dir, "--device", device, "Hi")
    assert_one_line_error(code, err, repr(device), BAD_DEVICES[device])
    from modeling_vaswani.evaluation.translation import load_translator

    with pytest.raises(ValueError, match=BAD_DEVICES[device]):
        load_translator(str(model_dir), device=device)


# --- text that is not UTF-8 ---------------------------------------------------------------------

NOT_UTF8 = {
    "continuation-byte-alone": b"\x80 dog",
    "overlong": b"\xc0\xaf",
    "cut-multibyte": b"caf\xc3",
    "surrogate": b"\xed\xa0\x80",
    "latin-1": "Grüße".encode("latin-1"),
    "utf-16": "A dog.".encode("utf-16"),
}


def _with_bad_line(data):
    return b"A dog runs.\nTwo men.\n" + data + b"\nA cat.\n"  # the bad line is line 3


@pytest.mark.parametrize("source", ["--file", "stdin"])
@pytest.mark.parametrize("case", list(NOT_UTF8))
def test_translate_input_that_is_not_utf8_names_file_and_line(monkeypatch, capsys, model_dir, tmp_path, case, source):
    import io

    data = _with_bad_line(NOT_UTF8[case])
    args = ["--model", model_dir, "--num_beams", "1", "--max_new_tokens", "2", "--batch_size", "1"]
    if source == "--file":
        path = write(tmp_path / "in.en", data)
        args += ["--file", path]
        name = path
    else:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        name = "<stdin>"
    code, err = run_in_process(monkeypatch, capsys, "translate.py", *args)
    assert_error_line(code, err, f"{name}, line 3: not valid UTF-8")


@pytest.mark.parametrize("flag", ["--source_file", "--reference_file"])
def test_evaluate_input_that_is_not_utf8_names_file_and_line(monkeypatch, capsys, model_dir, tmp_path, flag):
    good = write(tmp_path / "good.txt", _with_bad_line(b"fine"))
    bad = write(tmp_path / "bad.txt", _with_bad_line(NOT_UTF8["latin-1"]))
    files = {"--source_file": good, "--reference_file": good, flag: bad}
    code, err = run_in_process(monkeypatch, capsys, "evaluate_model.py", "--model", model_dir,
                               "--output_dir", tmp_path / "out", *[x for pair in files.items() for x in pair])
    assert_one_line_error(code, err, f"{bad}, line 3: not valid UTF-8")


# --- characters that some readers take for a line break -----------------------------------------

# Lines end at "\n" (or "\r\n"). Python's str.splitlines (and text-mode reading, for "\r") also
# break at these; splitting there would add lines and pair every later line with the wrong one.
LINE_BREAK_LOOKALIKES = {
    "lone-CR": "\r", "vertical-tab": "\x0b", "form-feed": "\x0c", "file-separator": "\x1c",
    "group-separator": "\x1d", "record-separator": "\x1e", "next-line": "\x85",
    "line-separator": "\u2028", "paragraph-separator": "\u2029",
}


@pytest.mark.parametrize("case", list(LINE_BREAK_LOOKALIKES))
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_training_reader_splits_lines_on_newline_only(tmp_path, case, gz):
    import gzip

    char = LINE_BREAK_LOOKALIKES[case]
    data = f"one{char}still one\r\ntwo\n{char}three\n".encode("utf-8")
    path = tmp_path / ("data.en.gz" if gz else "data.en")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert read_lines(path) == [f"one{char}still one", "two", f"{char}three"]


def _lookalike_file(tmp_path):
    lines = [f"A dog{char}runs." for char in LINE_BREAK_LOOKALIKES.values()] + ["A man.\r", "Two cats."]
    return write(tmp_path / "in.en", "\n".join(lines) + "\n"), len(lines)


@pytest.mark.parametrize("source", ["--file", "stdin"])
def test_translate_keeps_one_output_line_per_input_line(monkeypatch, capsys, model_dir, tmp_path, source):
    import io

    path, count = _lookalike_file(tmp_path)
    args = ["--model", model_dir, "--num_beams", "1", "--max_new_tokens", "3", "--batch_size", "4"]
    if source == "--file":
        args += ["--file", path, "--output", tmp_path / "out.de"]
    else:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes()), encoding="utf-8"))
        args += ["--output", tmp_path / "out.de"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / "translate.py"), *map(str, args)])
    runpy.run_path(str(SCRIPTS / "translate.py"), run_name="__main__")
    written = (tmp_path / "out.de").read_bytes().decode("utf-8")
    assert written.endswith("\n") and written.count("\n") == count


def test_translate_stream_splits_nothing_but_the_terminator(translator):
    model, tokenizer = translator
    from modeling_vaswani.evaluation.translation import translate_stream
    from modeling_vaswani.training.data import iter_lines

    chars = "".join(LINE_BREAK_LOOKALIKES.values())
    lines = [f"a{chars}b\n", "c\r\n", "d"]
    seen = []

    class Recording:
        device = torch.device("cpu")

        def generate(self, input_ids, attention_mask, **kwargs):
            seen.extend(tokenizer.batch_decode(input_ids, skip_special_tokens=True))
            return input_ids

    assert len(list(translate_stream(Recording(), tokenizer, lines, batch_size=2))) == 3
    assert len(seen) == 3
    import io

    assert list(iter_lines(io.BytesIO("".join(lines).encode()), "x")) == [f"a{chars}b", "c", "d"]


def test_a_translation_with_a_line_break_is_written_on_one_line():
    from modeling_vaswani.evaluation.translation import as_one_line

    assert as_one_line("Ein Hund\nläuft\r\nschnell\r.") == "Ein Hund läuft schnell ."
    assert as_one_line("kein Umbruch\u2028hier") == "kein Umbruch\u2028hier"  # no reader of ours splits there


# --- config.json values of the wrong type --------------------------------------------------------

WRONG_TYPES = [
    ("layer_norm_eps", None), ("layer_norm_eps", "1e-6"), ("layer_norm_eps", -1.0),
    ("dropout", "0.1"), ("dropout", True), ("dropout", None), ("attention_dropout", [0.1]),
    ("label_smoothing", "0.1"),
    ("num_layers", "2"), ("num_layers", 2.0), ("num_decoder_layers", "1"), ("d_model", "16"),
    ("d_ff", 32.5), ("num_heads", True), ("vocab_size", None), ("max_position_embeddings", "1024"),
    ("d_k", "8"), ("d_v", 0),
    ("pad_token_id", "0"), ("eos_token_id", 2.0), ("bos_token_id", True), ("decoder_start_token_id", -1),
    ("share_embeddings", "yes"), ("scale_embedding", None), ("norm_first", "no"), ("use_cache", "false"),
    ("init_std", "x"), ("init_std", -0.02),
    ("positional_encoding", ["sinusoidal"]), ("positional_encoding", None), ("activation_function", 1),
    ("is_encoder_decoder", False),
]


@pytest.mark.parametrize("field,value", WRONG_TYPES, ids=[f"{f}={v!r}" for f, v in WRONG_TYPES])
def test_config_json_value_of_the_wrong_type(model_dir, tmp_path, field, value):
    folder = copy_model(model_dir, tmp_path)
    changes = {field: value}
    if field == "share_embeddings":
        changes["tie_word_embeddings"] = value
    edit_json(folder / "config.json", **changes)
    for load in (VaswaniForConditionalGeneration.from_pretrained, VaswaniConfig.from_pretrained):
        with pytest.raises(ValueError, match=rf"\b{field}\b") as error:
            load(folder)
        assert str(folder) in str(error.value) and "\n" not in str(error.value)


def test_translate_script_reports_a_config_value_of_the_wrong_type(monkeypatch, capsys, model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    edit_json(folder / "config.json", layer_norm_eps=None)
    code, err = run_in_process(monkeypatch, capsys, "translate.py", "--model", folder, "Hello")
    assert_error_line(code, err, "layer_norm_eps must be a positive number, got None", folder)


@pytest.mark.parametrize("entry", ["load_translator", "translate.py", "evaluate_model.py"])
def test_config_json_without_model_type(monkeypatch, capsys, model_dir, tmp_path, entry):
    """AutoModel used to report such a folder as holding "custom code which must be executed"."""
    from modeling_vaswani.evaluation.translation import load_translator

    folder = copy_model(model_dir, tmp_path)
    edit_json(folder / "config.json", model_type=_DELETE)
    if entry == "load_translator":
        with pytest.raises(ValueError, match="has no model_type") as error:
            load_translator(str(folder), device="cpu")
        assert "custom code" not in str(error.value)
        return
    text = write(tmp_path / "text.txt", "A dog.\n")
    args = ["--model", folder] + (["Hello"] if entry == "translate.py" else [
        "--source_file", text, "--reference_file", text, "--output_dir", tmp_path / "out"])
    code, err = run_in_process(monkeypatch, capsys, entry, *args)
    assert_error_line(code, err, "has no model_type", '"model_type": "vaswani"')


# --- generation_config.json that is broken or mistyped ------------------------------------------

BAD_GENERATION_CONFIGS = {
    "not-json": ("{bad", "is not valid JSON"),
    "truncated": ('{"num_beams": 4, "length_pen', "is not valid JSON"),
    "empty": ("", "is not valid JSON"),
    "not-an-object": ("[4, 0.6]", "must hold a JSON object"),
    "offset-string": ({"max_output_length_offset": "50"}, "max_output_length_offset must be a non-negative integer"),
    "offset-negative": ({"max_output_length_offset": -5}, "max_output_length_offset must be"),
    "offset-float": ({"max_output_length_offset": 1.5}, "max_output_length_offset must be"),
    "num_beams-string": ({"num_beams": "4"}, "num_beams must be a positive integer"),
    "num_beams-zero": ({"num_beams": 0}, "num_beams must be a positive integer"),
    "num_beams-float": ({"num_beams": 2.5}, "num_beams must be a positive integer"),
    "length_penalty-string": ({"length_penalty": "x"}, "length_penalty must be a finite number"),
    "max_new_tokens-string": ({"max_new_tokens": "5"}, "max_new_tokens must be a positive integer"),
    "early_stopping-string": ({"early_stopping": "yes"}, "early_stopping must be"),
    "eos-string": ({"eos_token_id": "2"}, "eos_token_id must be a token id"),
    "do_sample-string": ({"do_sample": "false"}, "do_sample must be true or false"),
}


@pytest.mark.parametrize("case", list(BAD_GENERATION_CONFIGS))
def test_generation_config_json_that_is_broken_or_mistyped(model_dir, tmp_path, case):
    folder = copy_model(model_dir, tmp_path)
    content, message = BAD_GENERATION_CONFIGS[case]
    path = folder / "generation_config.json"
    if isinstance(content, dict):
        edit_json(path, **content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=message) as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert str(path) in str(error.value)


def test_generation_config_given_in_code_skips_the_file(model_dir, tmp_path):
    from transformers import GenerationConfig

    folder = copy_model(model_dir, tmp_path)
    (folder / "generation_config.json").write_text("{bad")
    model = VaswaniForConditionalGeneration.from_pretrained(folder, generation_config=GenerationConfig(num_beams=2))
    assert model.generation_config.num_beams == 2


def test_translate_script_reports_a_mistyped_offset(monkeypatch, capsys, model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    edit_json(folder / "generation_config.json", max_output_length_offset="50")
    code, err = run_in_process(monkeypatch, capsys, "translate.py", "--model", folder, "Hello")
    assert_error_line(code, err, "generation_config.json", "max_output_length_offset")


# --- tokenizer files that do not parse -----------------------------------------------------------

BAD_TOKENIZER_FILES = {
    "not-json": ("tokenizer.json", b"{"),
    "truncated": ("tokenizer.json", "half"),
    "empty": ("tokenizer.json", b""),
    "a-list": ("tokenizer.json", b"[]"),
    "empty-object": ("tokenizer.json", b"{}"),
    "model-not-an-object": ("tokenizer.json", b'{"model": 3}'),
    "binary": ("tokenizer.json", bytes(range(256)) * 4),
    "config-not-json": ("tokenizer_config.json", b"{bad"),
    "config-latin-1": ("tokenizer_config.json", '{"x": "Grüße"}'.encode("latin-1")),
}


@pytest.mark.parametrize("case", list(BAD_TOKENIZER_FILES))
def test_tokenizer_file_that_does_not_parse(model_dir, tmp_path, case):
    from modeling_vaswani.tokenizer_loading import load_tokenizer

    folder = copy_model(model_dir, tmp_path)
    name, data = BAD_TOKENIZER_FILES[case]
    path = folder / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if data == "half" else data)
    with pytest.raises(ValueError, match="is not (a )?valid") as error:
        load_tokenizer(folder)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_translate_script_reports_a_malformed_tokenizer(monkeypatch, capsys, model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    (folder / "tokenizer.json").write_text('{"model": ')
    code, err = run_in_process(monkeypatch, capsys, "translate.py", "--model", folder, "Hello")
    assert_error_line(code, err, folder / "tokenizer.json", "is not a valid tokenizer")


# --- weights that do not belong to the config ----------------------------------------------------

def _retyped(dtype):
    def change(tensors):
        return {name: (t * 100).to(dtype) for name, t in tensors.items()}
    return change


def _with_extra(name, shape=(16,)):
    def change(tensors):
        return {**tensors, name: torch.zeros(shape)}
    return change


FOREIGN_WEIGHTS = {
    "int8": (_retyped(torch.int8), "as I8, not as floating point"),
    "uint8": (_retyped(torch.uint8), "as U8"),
    "int32": (_retyped(torch.int32), "as I32"),
    "float8": (_retyped(torch.float8_e4m3fn), "as F8_E4M3"),
    "bool": (_retyped(torch.bool), "as BOOL"),
    "one-tensor-int8": (lambda t: {**t, sorted(t)[0]: t[sorted(t)[0]].to(torch.int8)}, "as I8"),
    "extra-encoder-layer": (_with_extra("model.encoder.layers.1.self_attn.q_proj.bias"),
                            "hold 1 tensors that the model described by its config.json does not have"),
    "extra-decoder-layer": (_with_extra("model.decoder.layers.5.feed_forward.linear_1.bias"),
                            "'model.decoder.layers.5.feed_forward.linear_1.bias'"),
    "stray-tensor": (_with_extra("model.something_else.weight"), "does not have"),
    "logits-bias-the-config-lacks": (_with_extra("final_logits_bias", (1, 250)), "'final_logits_bias'"),
}


@pytest.mark.parametrize("case", list(FOREIGN_WEIGHTS))
def test_weights_that_would_load_wrong_are_refused(model_dir, tmp_path, case):
    from safetensors.torch import load_file, save_file

    folder = copy_model(model_dir, tmp_path)
    change, message = FOREIGN_WEIGHTS[case]
    tensors = load_file(folder / "model.safetensors")
    save_file(change(tensors), str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert str(folder) in str(error.value)


def test_weights_of_a_deeper_model_under_a_shallower_config(model_dir, tmp_path):
    """Two layers saved, config.json edited back to one: transformers drops the second with a log line."""
    folder = tmp_path / "deeper"
    deep = tiny_model(vocab_size=json.loads((model_dir / "config.json").read_text())["vocab_size"], num_layers=2)
    deep.save_pretrained(folder)
    edit_json(folder / "config.json", num_layers=1, num_decoder_layers=1)
    with pytest.raises(ValueError, match=r"hold \d+ tensors .* \(first: 'model\.(de|en)coder\.layers\.1\."):
        VaswaniForConditionalGeneration.from_pretrained(folder)


# --- model inputs that would be read wrong -------------------------------------------------------

_IDS = torch.tensor([[5, 6, 7, 2], [5, 6, 2, 0]])
_PADDED = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
ADDITIVE_MASKS = {
    "minus-inf": torch.zeros(2, 4).masked_fill(_PADDED == 0, float("-inf")),
    "finfo-min": torch.zeros(2, 4).masked_fill(_PADDED == 0, torch.finfo(torch.float32).min),
    "minus-10000": torch.zeros(2, 4).masked_fill(_PADDED == 0, -10000.0),
    "integer-minus-1": (_PADDED - 1),
    "additive-without-padding": torch.zeros(2, 4),
    "half-precision": torch.zeros(2, 4, dtype=torch.float16).masked_fill(_PADDED == 0, float("-inf")),
}


@pytest.mark.parametrize("entry", ["forward", "generate"])
@pytest.mark.parametrize("case", list(ADDITIVE_MASKS))
def test_additive_attention_mask_is_refused(case, entry):
    model = tiny_model()
    mask = ADDITIVE_MASKS[case]
    with pytest.raises(ValueError, match=r"attention_mask (holds values other than 0 and 1|is 0 everywhere)"):
        if entry == "forward":
            model(input_ids=_IDS, attention_mask=mask, decoder_input_ids=torch.ones(2, 1, dtype=torch.long))
        else:
            model.generate(input_ids=_IDS, attention_mask=mask, max_new_tokens=2, num_beams=1)


@pytest.mark.parametrize("mask", [_PADDED, _PADDED.float(), _PADDED.bool()], ids=["long", "float", "bool"])
def test_zero_one_masks_of_any_dtype_agree(mask):
    """Control: the 0/1 mask, as integers, floats or booleans, gives the same logits."""
    model = tiny_model()
    expected = model(input_ids=_IDS, attention_mask=_PADDED, decoder_input_ids=torch.ones(2, 1, dtype=torch.long))
    got = model(input_ids=_IDS, attention_mask=mask, decoder_input_ids=torch.ones(2, 1, dtype=torch.long))
    assert torch.allclose(expected.logits, got.logits)


def test_additive_decoder_attention_mask_is_refused():
    mask = torch.tensor([[0.0, float("-inf")]])
    with pytest.raises(ValueError, match="decoder_attention_mask holds values other than 0 and 1"):
        tiny_model()(input_ids=_IDS[:1], decoder_input_ids=torch.tensor([[1, 5]]), decoder_attention_mask=mask)


BOTH_INPUTS = {
    "encoder": (dict(input_ids=_IDS, inputs_embeds=torch.zeros(2, 4, 16),
                     decoder_input_ids=torch.ones(2, 1, dtype=torch.long)), "input_ids or inputs_embeds, not both"),
    "decoder": (dict(input_ids=_IDS, decoder_input_ids=torch.ones(2, 1, dtype=torch.long),
                     decoder_inputs_embeds=torch.zeros(2, 1, 16)), "decoder_input_ids or decoder_inputs_embeds"),
}


@pytest.mark.parametrize("side", list(BOTH_INPUTS))
@pytest.mark.parametrize("model_class", ["VaswaniModel", "VaswaniForConditionalGeneration"])
def test_ids_and_embeddings_both_given(side, model_class):
    from modeling_vaswani import VaswaniModel

    model = tiny_model() if model_class == "VaswaniForConditionalGeneration" else VaswaniModel(tiny_model().config)
    inputs, message = BOTH_INPUTS[side]
    with pytest.raises(ValueError, match=message):
        model(**inputs)


BAD_LABELS = {
    "fewer-rows": (dict(labels=torch.tensor([[5, 2]])), "labels holds 1 sentences but the source batch holds 2"),
    "more-rows": (dict(labels=torch.tensor([[5, 2]] * 3)), "labels holds 3 sentences"),
    "one-dimensional": (dict(labels=torch.tensor([5, 2])), r"labels must be a \(batch, length\) tensor"),
    "float": (dict(labels=torch.tensor([[5.0, 2.0]] * 2)), "labels must hold integer token ids"),
    "shape-unlike-decoder-inputs": (dict(labels=torch.tensor([[5, 2]] * 2),
                                         decoder_input_ids=torch.ones(2, 3, dtype=torch.long)),
                                    r"labels has shape \(2, 2\) but the decoder inputs have \(2, 3\)"),
    "fewer-rows-than-embeds": (dict(labels=torch.tensor([[5, 2]]), inputs_embeds=torch.zeros(2, 4, 16),
                                    input_ids=None), "labels holds 1 sentences but the source batch holds 2"),
}


@pytest.mark.parametrize("case", list(BAD_LABELS))
def test_labels_that_do_not_fit_the_batch(case):
    inputs, message = BAD_LABELS[case]
    with pytest.raises(ValueError, match=message):
        tiny_model()(**{"input_ids": _IDS, **inputs})


def test_labels_of_the_right_shape_give_a_loss():
    output = tiny_model()(input_ids=_IDS, labels=torch.tensor([[5, 2], [6, -100]]))
    assert output.loss is not None and torch.isfinite(output.loss)


# --- inputs longer than the limit: cut, and said so ----------------------------------------------

TRANSLATION_LOGGER = "modeling_vaswani.evaluation.translation"


def _cut_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == TRANSLATION_LOGGER and "were cut" in r.getMessage()]


@pytest.mark.parametrize("lines,cut", [(["dog " * 200, "A dog."], 1), (["dog " * 200] * 3, 3), (["A dog."] * 3, 0)],
                         ids=["one-of-two", "all", "none"])
def test_translate_says_once_how_many_sentences_were_cut(translator, caplog, lines, cut):
    model, tokenizer = translator
    with caplog.at_level("WARNING", logger=TRANSLATION_LOGGER):
        translate(model, tokenizer, lines, max_source_length=16, num_beams=1, max_new_tokens=2, batch_size=1)
    warnings = _cut_warnings(caplog)
    if cut:
        assert warnings == [warnings[0]] and f"{cut} of {len(lines)} sentences" in warnings[0]
        assert "16 tokens" in warnings[0]
    else:
        assert warnings == []


def test_translate_stream_says_it_once_for_the_whole_stream(translator, caplog):
    from modeling_vaswani.evaluation.translation import translate_stream

    model, tokenizer = translator
    lines = ["A dog.", "dog " * 100, "Two men.", "cat " * 100, "A cat."] * 2
    with caplog.at_level("WARNING", logger=TRANSLATION_LOGGER):
        out = list(translate_stream(model, tokenizer, lines, batch_size=2, max_source_length=16,
                                    num_beams=1, max_new_tokens=2))
    assert len(out) == 10
    warnings = _cut_warnings(caplog)
    assert len(warnings) == 1 and "4 of 10 sentences" in warnings[0]


def test_translate_script_warns_about_cut_sentences(monkeypatch, caplog, model_dir, tmp_path):
    path = write(tmp_path / "in.en", "A dog.\n" + "dog " * 600 + "\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / "translate.py"), "--model", str(model_dir), "--file", str(path),
                                      "--num_beams", "1", "--max_new_tokens", "2", "--batch_size", "1"])
    with caplog.at_level("WARNING", logger=TRANSLATION_LOGGER):
        runpy.run_path(str(SCRIPTS / "translate.py"), run_name="__main__")
    warnings = _cut_warnings(caplog)
    assert len(warnings) == 1 and "1 of 2 sentences are longer than 512 tokens" in warnings[0]
