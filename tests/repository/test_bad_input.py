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
    with pytest.raises(OSError, match="not a valid JSON file") as error:
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
    with pytest.raises(ValueError, match=rf"`max_new_tokens` must be greater than 0, but is {value}"):
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
    shadowing = [p.name for p in SCRIPTS.glob("*.py") if importlib.util.find_spec(p.stem) is not None]
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
