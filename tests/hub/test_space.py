"""The Space that runs the explorer: its files, its card's Hub metadata, and push_to_hub.py --space's dry run."""

import ast
import configparser
import re
import sys

import pytest
from huggingface_hub import SpaceCard

from modeling_vaswani.hub.space import REQUIREMENTS, write_space

pytest.importorskip("gradio", reason='the Space records the gradio version it runs: pip install -e ".[explorer]"')

MODEL_ID = "someone/vaswani-test"


def requirement_name(line: str) -> str:
    return re.split(r"[<>=!~ ]", line, maxsplit=1)[0]


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    return write_space(tmp_path_factory.mktemp("space"), MODEL_ID)


def test_card_and_code_are_a_gradio_space_of_the_packages_code_and_pinned_requirements(space, repo_root):
    data = SpaceCard.load(space / "README.md", ignore_metadata_errors=False).data
    assert (data.sdk, data.app_file, data.models) == ("gradio", "app.py", [MODEL_ID])
    assert re.fullmatch(r"\d+\.\d+\.\d+", data.sdk_version)
    assert repr(MODEL_ID) in (space / "app.py").read_text(encoding="utf-8")
    package = repo_root / "modeling_vaswani"
    copied = sorted(space.rglob("*.py"))
    for path in copied:
        if path.name != "app.py":
            assert path.read_bytes() == (package / path.relative_to(space / "modeling_vaswani")).read_bytes(), path
    allowed = {requirement_name(line) for line in REQUIREMENTS} | set(sys.stdlib_module_names) | {"modeling_vaswani"}
    for path in copied:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.relative_to(space)} imports {name}"
    # The requirements are the package's pins.
    config = configparser.ConfigParser()
    config.read(repo_root / "setup.cfg")
    pins = {requirement_name(line): line for line in config["options"]["install_requires"].split()}
    pins |= {requirement_name(line): line for line in config["options.extras_require"]["explorer"].split()}
    assert {requirement_name(line): line for line in REQUIREMENTS}.items() <= pins.items()


@pytest.mark.slow
def test_push_to_hub_dry_run_writes_a_space_that_starts(tmp_path, monkeypatch, capsys, load_module, repo_root):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_module(repo_root / "scripts" / "push_to_hub.py").main([
        "--model_dir", str(repo_root / "hub_card"), "--repo_id", MODEL_ID, "--dry_run",
        "--output_dir", str(tmp_path / "model"), "--space", "someone/explorer", "--space_dir", str(tmp_path / "space")])
    out = capsys.readouterr().out
    assert "builds the explorer on the model" in out and "nothing uploaded" in out
    assert (tmp_path / "space" / "app.py").is_file() and not list((tmp_path / "space").rglob("__pycache__"))


@pytest.mark.parametrize("space_id", ["no-namespace", "a/b/c", "/name"])
def test_push_to_hub_refuses_a_bad_space_id(space_id, load_module, repo_root):
    with pytest.raises(ValueError, match=re.escape(repr(space_id))):
        load_module(repo_root / "scripts" / "push_to_hub.py").main(
            ["--model_dir", str(repo_root / "hub_card"), "--repo_id", MODEL_ID, "--dry_run", "--space", space_id])
