"""The documentation (README.md, docs/*.md) matches the code; its mermaid blocks are well formed."""

import ast
import glob
import re
from pathlib import Path

import pytest
import torch

from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy
from modeling_vaswani.training.optimization import noam_lr

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DIAGRAM_TYPES = set("""flowchart graph sequenceDiagram classDiagram stateDiagram stateDiagram-v2 erDiagram journey
    gantt pie quadrantChart requirementDiagram gitGraph mindmap timeline sankey-beta xychart-beta block-beta
    packet-beta architecture-beta""".split())
TOP_LEVEL = ("modeling_vaswani", "scripts", "examples", "docs", "tests", "data", "benchmarks", "hub_card")
PATH_RE = re.compile(r"(?<![\w/.-])((?:%s)/[\w./*-]*[\w*])" % "|".join(TOP_LEVEL))
SYMBOL_RE = re.compile(r"([\w/.-]+\.py):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")
FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
QUICK_START = """\
pip install torch==2.13.0 -e ".[dev]" && python scripts/translate.py "Two dogs are playing in the snow."
HF_HUB_OFFLINE=1 python -m pytest tests
"""


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _mermaid(doc):
    """Each mermaid block of doc as its stripped lines, without blank lines and %% comments."""
    return [[line.strip() for line in m.group(2).splitlines() if line.strip() and not line.strip().startswith("%%")]
            for m in FENCE_RE.finditer(_text(doc)) if m.group(1) == "mermaid"]


def _outside_quotes(line: str) -> str:
    return re.sub(r'"[^"]*"', '""', line)


def _check_brackets(lines):
    stack = []
    for line in lines:
        assert line.count('"') % 2 == 0, f"unclosed quote: {line}"
        for char in _outside_quotes(line):
            if char in "([{":
                stack.append(char)
            elif char in ")]}":
                assert stack and "([{".index(stack.pop()) == ")]}".index(char), f"{char!r} closes nothing: {line}"
    assert not stack, f"unclosed {stack}"


def _check_flowchart(lines):
    assert len(lines[0].split()) == 2 and lines[0].split()[1] in {"TB", "TD", "BT", "LR", "RL"}, lines[0]
    assert sum(line.split()[0] == "subgraph" for line in lines) == lines.count("end"), "a subgraph without end"
    for line in lines[1:]:
        bare = _outside_quotes(line)
        assert bare.count("|") % 2 == 0, f"unbalanced |edge label|: {line}"
        # A node's label is quoted (id["…"], id(("…")), id[["…"]], id{"…"}): Mermaid breaks on bare brackets.
        for shape in re.finditer(r"\b\w+(\(\(|\[\[|\[|\(|\{)", bare):
            assert bare[shape.end():shape.end() + 1] == '"', f"unquoted node label after {shape.group(0)!r}: {line}"
        assert line == "end" or not re.search(r"(^|[\s>|])end\b(?!\s*$)", bare), f"'end' used as a node id: {line}"


def _check_sequence(lines):
    participants, depth = set(), 0
    message = re.compile(r"^(\w+)\s*(?:->>|-->>|->|-->|-x|--x|-\)|--\))\s*(\w+)\s*:\s*\S")
    for line in lines[1:]:
        word = line.split()[0]
        if word in ("participant", "actor"):
            participants.add(line.split()[1])
        elif word in ("loop", "alt", "opt", "par", "critical", "break", "rect", "end"):
            depth += -1 if word == "end" else 1
            assert depth >= 0, "an 'end' closes no block"
        elif word == "Note":
            assert re.match(r"^Note (over|left of|right of) [\w, ]+:\s*\S", line), f"bad note: {line}"
        elif word not in ("else", "and", "autonumber", "activate", "deactivate"):
            assert (found := message.match(line)), f"not a message, note or block line: {line}"
            assert set(found.groups()) <= participants, f"an undeclared participant: {line}"
    assert depth == 0, "a loop/alt/... block is not closed with 'end'"


def _xychart(lines) -> dict:
    chart = {"series": []}
    for line in lines[1:]:
        word, values = line.split()[0], re.search(r"\[(.*)\]", line)
        if word == "title":
            chart["title"] = re.match(r'^title "([^"]+)"$', line).group(1)
        elif word == "x-axis":
            chart["x"] = [item.strip() for item in values.group(1).split(",")]
        elif word in ("line", "bar"):
            chart["series"].append([float(v) for v in values.group(1).split(",")])
        else:
            assert word == "y-axis" and re.match(r'^y-axis( "[^"]+")?( -?[\d.]+ --> -?[\d.]+)?$', line), line
    assert chart["series"] and all(len(v) == len(chart["x"]) for v in chart["series"]), "values ≠ categories"
    return chart


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_mermaid_blocks_are_well_formed(doc):
    for lines in _mermaid(doc):
        assert lines and lines[0].split()[0] in DIAGRAM_TYPES, lines[:1]
        _check_brackets(lines)
        {"flowchart": _check_flowchart, "graph": _check_flowchart, "sequenceDiagram": _check_sequence,
         "xychart-beta": _xychart}.get(lines[0].split()[0], len)(lines)


def test_the_diagrams_page_draws_the_promised_diagrams_and_its_charts_hold_the_package_s_numbers():
    blocks = _mermaid(REPO / "docs" / "diagrams.md")
    kinds = [lines[0].split()[0] for lines in blocks]
    assert kinds.count("flowchart") >= 8 and kinds.count("sequenceDiagram") >= 2 and kinds.count("xychart-beta") >= 2
    assert "](docs/diagrams.md)" in _text(REPO / "README.md")
    charts = [_xychart(lines) for lines, kind in zip(blocks, kinds) if kind == "xychart-beta"]
    charts = {chart.get("title", ""): chart for chart in charts}
    (lr,) = [chart for title, chart in charts.items() if title.startswith("Eq. (3)")]  # the learning rate
    assert lr["series"] == [[round(noam_lr(int(x) * 1000, 512, warmup) * 1e4, 2) for x in lr["x"]]
                            for warmup in (4000, 8000)]
    ((values,),) = [chart["series"] for title, chart in charts.items() if title.startswith("Smoothed target")]
    logits = torch.zeros(len(values), requires_grad=True)
    label_smoothed_cross_entropy(logits[None], torch.tensor([3]), 0.1).backward()
    target = torch.softmax(logits.detach(), -1) - logits.grad  # ∂H(q, p)/∂z = p − q
    assert values == [round(v, 4) for v in target.tolist()]


def _definitions(path: Path) -> set[str]:
    """Top-level functions, classes and constants, and Class.method, Class.attribute."""
    def named(nodes, prefix=""):
        for node in nodes:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            yield from (prefix + target.id for target in targets if isinstance(target, ast.Name))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield prefix + node.name
            if isinstance(node, ast.ClassDef) and not prefix:
                yield from named(node.body, f"{node.name}.")
    return set(named(ast.parse(_text(path)).body))


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors: headings in lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    slugs, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE_RE.sub("", _text(path)), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        slugs.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return slugs


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_reference_and_link_exists(doc):
    text, prose = _text(doc), FENCE_RE.sub("", _text(doc))
    links = LINK_RE.findall(prose)
    pieces = [m.group(2) for m in FENCE_RE.finditer(text)] + re.findall(r"`([^`\n]+)`", prose) + [
        target for target in links if "://" not in target]
    paths = {path.rstrip(".") for piece in pieces for path in PATH_RE.findall(piece)}
    if doc.name in ("README.md", "paper_mapping.md", "diagrams.md"):  # many by design: few means the pattern broke
        assert len(paths) > 10, sorted(paths)
    assert not [p for p in sorted(paths) if not (glob.glob(str(REPO / p)) if "*" in p else (REPO / p).exists())]
    references = {ref for piece in pieces for ref in SYMBOL_RE.findall(piece)}
    assert references or doc.name not in ("README.md", "paper_mapping.md")
    assert not [f"{file}:{name}" for file, name in sorted(references)
                if not (REPO / file).is_file() or name not in _definitions(REPO / file)]
    for target in links:  # relative to the page
        file, _, anchor = target.partition("#")
        page = (doc.parent / file) if file else doc
        assert "://" in target or page.exists() and (not anchor or anchor in _anchors(page)), target


def test_paper_mapping_covers_every_section_the_code_realises():
    text = _text(REPO / "docs" / "paper_mapping.md")
    for item in ("§3 ", "§3.1", "§3.2.1", "§3.2.2", "§3.2.3", "§3.3", "§3.4", "§3.5", "§5.1", "§5.3", "§5.4",
                 "§6.1", "Eq. (1)", "Eq. (2)", "Eq. (3)", "Table 3", "(A)", "(B)", "(C)", "(D)", "(E)"):
        assert item in text, item
    deviations = text.split("## Deviations", 1)[1].splitlines()
    assert len([line for line in deviations if line.startswith("| ") and not line.startswith("| Topic")]) >= 10


def test_readme_keeps_the_quick_start_results_examples_and_names_the_shipped_model():
    readme = _text(REPO / "README.md")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert f"```bash\n{QUICK_START}```" in quick_start
    assert '`HF_HUB_OFFLINE=1 python -m pytest tests -m "not slow"`' in quick_start  # the fast test command
    ci = [line for line in _text(REPO / ".ci" / "run").splitlines() if line and not line.startswith("#")]
    assert ci[-1] == QUICK_START.splitlines()[-1], "the last command of .ci/run is not the README's test command"
    results = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
    assert "Filled in from measured runs: see hub_card/README.md and benchmarks/RESULTS.md." in results
    assert all(f"examples/{script.name}" in readme for script in (REPO / "examples").glob("[0-9][0-9]_*.py"))
    python = "\n".join(m.group(2) for m in FENCE_RE.finditer(readme) if m.group(1) == "python")
    assert "shipped_model_path()" in python and not re.search(r"""["']hub_card["']""", python)  # from any folder


def test_the_import_graph_is_current_and_model_imports_only_model(load_module):
    graph = load_module(REPO / "docs" / "import_graph.py")
    assert graph.current(_text(graph.TARGET)) == graph.render(), "out of date: run python docs/import_graph.py"
    # What save_pretrained copies into a checkpoint must load without the rest of the package.
    edges = graph.find_imports(graph.find_modules())
    assert not [f"{s} → {t}" for s, t in edges if graph.room(s) == "model" and graph.room(t) != "model"]
    assert any(graph.room(s) == graph.room(t) == "model" for s, t in edges), "no imports found inside model/"
