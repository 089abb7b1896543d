"""modeling_vaswani — the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Laid out by role: model/ (the Transformer, exactly the files a checkpoint carries), training/ (§5),
evaluation/ (§6.1), hub/ (sharing a model); the order to read it in is in README.md. Importing the package
registers the model with the Auto classes (`save_pretrained` then writes `auto_map` and copies the code, so a
saved folder loads with `trust_remote_code=True` without this package) and the "translation" pipeline.
"""

from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM
from transformers import pipelines

from . import cli, outputs  # standard library only; a script loads them before the package (scripts/_light_cli.py)

from .model.configuration_vaswani import VaswaniConfig
from .model.modeling_vaswani import VaswaniForConditionalGeneration, VaswaniModel, VaswaniPreTrainedModel
from .model.pipeline_vaswani import VaswaniTranslationPipeline

AutoConfig.register("vaswani", VaswaniConfig, exist_ok=True)
AutoModel.register(VaswaniConfig, VaswaniModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VaswaniConfig, VaswaniForConditionalGeneration, exist_ok=True)
VaswaniConfig.register_for_auto_class()
VaswaniModel.register_for_auto_class("AutoModel")
VaswaniForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

# transformers 5 dropped its "translation" task and answers it with a "removed" error before it
# looks at the registry; registering ours brings the task back (for any seq2seq model).
if "translation" not in pipelines.PIPELINE_REGISTRY.supported_tasks:
    getattr(pipelines, "REMOVED_TASKS", {}).pop("translation", None)
    pipelines.PIPELINE_REGISTRY.register_pipeline("translation", pipeline_class=VaswaniTranslationPipeline,
                                                  pt_model=AutoModelForSeq2SeqLM, type="text")

# The shipped English→German model: hub_card/ at the root of the repository (outputs.py refuses to write into it).
SHIPPED_MODEL = str(outputs.SHIPPED_MODEL)


def shipped_model_path() -> str:
    """`SHIPPED_MODEL`, from any working directory; FileNotFoundError where the package was installed without
    the repository's hub_card/ (a wheel)."""
    if not (Path(SHIPPED_MODEL) / "config.json").is_file():
        raise FileNotFoundError(f"the shipped model is not here ({SHIPPED_MODEL} holds no config.json): it comes with "
                                "the repository, not with the installed package. Install the package from a clone "
                                "(pip install -e .), or name a model folder or Hub id instead.")
    return SHIPPED_MODEL


__all__ = ["VaswaniConfig", "VaswaniModel", "VaswaniForConditionalGeneration", "VaswaniPreTrainedModel",
           "SHIPPED_MODEL", "shipped_model_path"]
__version__ = "0.1.0"
