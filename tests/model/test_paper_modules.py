"""The paper modules import torch and each other only; what transformers needs lives beside them."""

import ast
from pathlib import Path

import pytest

MODEL_DIR = Path(__file__).resolve().parents[2] / "modeling_vaswani" / "model"
PAPER_MODULES = ["positional_encoding", "embeddings", "attention", "masking", "feed_forward", "sublayer", "encoder",
                 "decoder"]


def imports_of(path: Path) -> tuple[set[str], set[str]]:
    """(absolute module names, relative module names) that a file imports, at any depth of its code."""
    absolute, relative = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            absolute.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            (relative if node.level else absolute).add(node.module or "")
    return absolute, relative


@pytest.mark.parametrize("module", PAPER_MODULES)
def test_paper_module_imports_torch_and_other_paper_modules_only(module):
    absolute, relative = imports_of(MODEL_DIR / f"{module}.py")
    assert not [name for name in absolute if name.split(".")[0] == "transformers"]
    assert {name.split(".")[0] for name in absolute} <= {"math", "torch"}
    assert relative <= set(PAPER_MODULES)

