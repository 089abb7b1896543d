"""A Gradio Space running the explorer on a Hub model: app.py, requirements.txt, README.md and a copy of
the modules the page imports (the package is not on PyPI)."""

import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from huggingface_hub import SpaceCard, SpaceCardData

from .repository import run_isolated

PACKAGE = Path(__file__).resolve().parents[1]
SPACE_CODE = ("__init__.py", "cli.py", "outputs.py", "model/*.py", "explorer/*.py")  # what `import modeling_vaswani.explorer.app` reads
# The Space installs only these (the package's own pins, setup.cfg, and its [explorer] extra).
REQUIREMENTS = ("torch>=2.4", "transformers>=5.0,<6", "tokenizers>=0.21,<1", "safetensors>=0.4,<1",
                "huggingface_hub>=1.0,<3", "matplotlib>=3.7", "gradio>=6,<7")

APP = '''"""The Transformer explorer on {model_id}: a sentence, its translation, and the numbers on the way."""

import os

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import modeling_vaswani  # the copy beside this file; registers the model with the Auto classes
from modeling_vaswani.explorer.app import build_app

MODEL = os.environ.get("EXPLORER_MODEL", {model_id!r})
model = AutoModelForSeq2SeqLM.from_pretrained(MODEL).eval()
tokenizer = AutoTokenizer.from_pretrained(MODEL)
demo = build_app(model, tokenizer, title="Transformer explorer: {model_id}")

if __name__ == "__main__":
    demo.queue(default_concurrency_limit=1).launch()
'''

_CLEAN_PROCESS_CHECK = r"""
import json, sys
sys.path.insert(0, ".")
import app, modeling_vaswani
print(json.dumps({"page": type(app.demo).__name__, "package": modeling_vaswani.__file__}))
"""


def write_space(space_dir, model_id: str) -> Path:
    """Write the Space that runs the explorer on the Hub model `model_id` to `space_dir`."""
    try:
        gradio_version = version("gradio")
    except PackageNotFoundError:
        raise ModuleNotFoundError('Writing a Space needs gradio, the version it runs: pip install -e ".[explorer]"') \
            from None
    space_dir = Path(space_dir)
    for pattern in SPACE_CODE:
        for source in sorted(PACKAGE.glob(pattern)):
            target = space_dir / "modeling_vaswani" / source.relative_to(PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    (space_dir / "app.py").write_text(APP.format(model_id=model_id), encoding="utf-8")
    (space_dir / "requirements.txt").write_text("\n".join(REQUIREMENTS) + "\n", encoding="utf-8")
    data = SpaceCardData(title="Transformer explorer", sdk="gradio", sdk_version=gradio_version, app_file="app.py",
                         models=[model_id], license="apache-2.0", emoji="🔍", colorFrom="indigo", colorTo="blue",
                         short_description="Watch the Transformer of Attention Is All You Need translate")
    body = (f"\n# Transformer explorer\n\nType an English sentence and watch [{model_id}](https://huggingface.co/"
            f"{model_id}) translate it: its BPE pieces, §6.1's beam search step by step, the attention weights "
            "of every layer and head (Eq. (1)), the positional encoding (§3.5) and the masks (§3.2.3).\n")
    SpaceCard(f"---\n{data.to_yaml()}\n---\n{body}").save(space_dir / "README.md")
    return space_dir


def validate_space(space_dir, model) -> dict:
    """Import the Space's app.py in a clean process, with `model` (a folder or Hub id) in place of its
    own; raise ValueError naming the problem, or return what it built."""
    space_dir = Path(space_dir).resolve()
    # -B: no __pycache__ left in the folder that is uploaded.
    outcome = run_isolated(["-B", "-c", _CLEAN_PROCESS_CHECK], space_dir,
                           {"EXPLORER_MODEL": str(model), "GRADIO_ANALYTICS_ENABLED": "False"},
                           f"{space_dir}/app.py does not start in a clean process")
    if not Path(outcome["package"]).is_relative_to(space_dir):
        raise ValueError(f"{space_dir}/app.py imported modeling_vaswani from {outcome['package']}, not its own copy.")
    return outcome
