"""A model folder is input from a stranger: DOORS names each way the package reads one (or a run folder)."""

import runpy
from unittest import mock

import pytest
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainingArguments

from benchmarks.table3.runs import read_results, training_facts
from checks import SCRIPTS, assert_names
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.conversion.ctranslate2 import read_conversion_record
from modeling_vaswani.conversion.marian import convert_marian, export_marian
from modeling_vaswani.evaluation.translation import load_translator
from modeling_vaswani.hub.model_card import load_results
from modeling_vaswani.model import loading
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.checkpoint_averaging import _check_configs
from modeling_vaswani.training.recipe.run import check_resumed_model
from modeling_vaswani.training.run_folder import read_run_info
from modeling_vaswani.training.trainer import VaswaniTrainer


def _trainer(model, folder):
    args = Seq2SeqTrainingArguments(output_dir=str(folder / "run"), report_to="none", use_cpu=True)
    return VaswaniTrainer(model=model, args=args)


def _without_weights(folder):  # the weights index is read where model.safetensors is missing
    (folder / "model.safetensors").unlink()
    return VaswaniForConditionalGeneration.from_pretrained(folder)


def _hub_index_first(folder):  # checked before the shards it names are fetched
    with mock.patch.object(loading, "cached_file", lambda name, file, **kwargs: str(folder / file)):
        loading.check_hub_index("user/model", {})


def _ctranslate2(folder):
    from modeling_vaswani.evaluation.ctranslate2_engine import load_ctranslate2_translator

    return load_ctranslate2_translator(folder / "ct2", device="cpu", threads=1)


# name: how the package reads the folder it is given
DOORS = {
    "from_pretrained": VaswaniForConditionalGeneration.from_pretrained,
    "config": VaswaniConfig.from_pretrained,
    "AutoModel": AutoModelForSeq2SeqLM.from_pretrained,
    "AutoModel-remote-code": lambda folder: AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True),
    "load_translator": lambda folder: load_translator(str(folder), device="cpu"),
    "load_tokenizer": load_tokenizer,
    "without weights": _without_weights,
    # after from_pretrained fetched it from the Hub (its files are symlinks)
    "Hub cache copy": lambda folder: loading.check_model_files(folder, generation_config_given=False, local=False),
    "Hub index first": _hub_index_first,
    "CTranslate2": _ctranslate2,  # the conversion, in folder/ct2
    "convert_marian": lambda folder: convert_marian(folder, folder.parent / "converted"),
    "export_marian": lambda folder: export_marian(folder, folder.parent / "exported"),
    # checkpoints and the records of runs
    "averaging": lambda folder: _check_configs([folder]),
    "resuming": lambda folder: check_resumed_model(None, folder),
    "Trainer resuming": lambda folder: _trainer(VaswaniForConditionalGeneration.from_pretrained(folder),
                                                folder).train(str(folder)),
    "read_run_info": read_run_info,
    "load_results": lambda folder: load_results(folder / "results.json"),
    "--started_from": lambda folder: runpy.run_path(str(SCRIPTS / "collect_results.py"))["earlier_training"](folder),
    "read_conversion_record": read_conversion_record,
    "training_facts": training_facts,
    "table3 read_results": read_results,
}


@pytest.fixture(scope="session")
def doors():
    return DOORS


@pytest.fixture(scope="session")
def refused():
    """refused(error_class, door, folder, *names): one line of error_class naming folder and `names`."""
    def check(error_class, door, folder, *names):
        with pytest.raises(error_class) as error:
            DOORS[door](folder)
        assert_names(error, folder, *names)
        assert "\n" not in str(error.value)
        return error

    return check
