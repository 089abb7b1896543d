"""The documentation matches the code: diagrams are well formed, and every file, function, link
and number it names exists.

Checked in README.md and docs/*.md:
- every ```mermaid block starts with a known diagram type and is structurally sound (quotes,
  brackets, subgraph/loop … end, quoted node labels, declared participants, as many values as
  categories in a chart) — the Mermaid CLI is not available offline, so this is the check;
- every repository path written as code or as a link target exists (globs must match a file);
- every `path.py:name` reference names a function, class, method or constant defined there;
- every relative link reaches a file, and every #anchor a heading;
- docs/diagrams.md draws all the promised diagrams, and its learning-rate and label-smoothing
  charts hold the numbers the package computes;
- the import graph in docs/architecture.md is what docs/import_graph.py draws from the code now;
- the README keeps the quick-start commands (the test command is the one .ci/run runs) and lists
  every example script.
"""

import ast
import glob
import importlib.util
import re
from pathlib import Path

import pytest
import torch

from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy
from modeling_vaswani.training.optimization import noam_lr

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DIAGRAMS = REPO / "docs" / "diagrams.md"
# The pages whose file references are many by design: finding few means the pattern broke.
MAPPED = [REPO / "README.md", REPO / "docs" / "paper_mapping.md", DIAGRAMS]

DIAGRAM_TYPES = {
    "flowchart", "graph", "sequenceDiagram", "classDiagram", "stateDiagram", "stateDiagram-v2", "erDiagram",
    "journey", "gantt", "pie", "quadrantChart", "requirementDiagram", "gitGraph", "mindmap", "timeline",
    "sankey-beta", "xychart-beta", "block-beta", "packet-beta", "architecture-beta",
}
FLOW_DIRECTIONS = {"TB", "TD", "BT", "LR", "RL"}
SEQUENCE_BLOCKS = ("loop", "alt", "opt", "par", "critical", "break", "rect")
OPENING, CLOSING = "([{", ")]}"

TOP_LEVEL = ("modeling_vaswani", "scripts", "examples", "docs", "tests", "data", "benchmarks", "hub_card")
PATH_RE = re.compile(r"(?<![\w/.-])((?:%s)/[\w./*-]*[\w*])" % "|".join(TOP_LEVEL))
SYMBOL_RE = re.compile(r"([\w/.-]+\.py):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")
FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")

QUICK_START = """\
pip install torch==2.13.0 -e ".[dev]" && python scripts/translate.py "Two dogs are playing in the snow."
HF_HUB_OFFLINE=1 python -m pytest tests
"""
FAST_TESTS = 'HF_HUB_OFFLINE=1 python -m pytest tests -m "not slow"'


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _mermaid_blocks():
    for doc in DOCS:
        for number, match in enumerate(m for m in FENCE_RE.finditer(_text(doc)) if m.group(1) == "mermaid"):
            yield pytest.param(match.group(2), id=f"{doc.name}-mermaid-{number + 1}")


def _lines(block: str) -> list[str]:
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("%%")]


def _outside_quotes(line: str) -> str:
    return re.sub(r'"[^"]*"', '""', line)


def _check_brackets(block: str):
    stack = []
    for number, line in enumerate(_lines(block), start=1):
        assert line.count('"') % 2 == 0, f"line {number} has an unclosed quote: {line}"
        for char in _outside_quotes(line):
            if char in OPENING:
                stack.append((char, number))
            elif char in CLOSING:
                assert stack, f"line {number}: {char!r} closes nothing: {line}"
                opened, _ = stack.pop()
                assert OPENING.index(opened) == CLOSING.index(char), f"line {number}: {opened!r} closed by {char!r}"
    assert not stack, f"unclosed {stack[-1][0]!r} opened on line {stack[-1][1]}"


def _check_flowchart(lines: list[str]):
    header = lines[0].split()
    assert len(header) == 2 and header[1] in FLOW_DIRECTIONS, f"flowchart needs a direction: {lines[0]}"
    opened = sum(1 for line in lines if line.split()[0] == "subgraph")
    closed = sum(1 for line in lines if line == "end")
    assert opened == closed, f"{opened} subgraph(s) but {closed} end(s)"
    for line in lines[1:]:
        bare = _outside_quotes(line)
        assert bare.count("|") % 2 == 0, f"unbalanced |edge label|: {line}"
        # A node's label must be quoted: id["…"], id(("…")), id[["…"]], id{"…"} — unquoted text with
        # brackets or punctuation breaks the Mermaid parser.
        for shape in re.finditer(r"\b\w+(\(\(|\[\[|\[|\(|\{)", bare):
            after = bare[shape.end():shape.end() + 1]
            assert after == '"', f"unquoted node label after {shape.group(0)!r}: {line}"
        assert not re.search(r"(^|[\s>|])end\b(?!\s*$)", bare) or line == "end", f"'end' used as a node id: {line}"


def _check_sequence(lines: list[str]):
    participants = set()
    depth = 0
    message = re.compile(r"^(\w+)\s*(?:->>|-->>|->|-->|-x|--x|-\)|--\))\s*(\w+)\s*:\s*\S")
    for line in lines[1:]:
        word = line.split()[0]
        if word in ("participant", "actor"):
            participants.add(line.split()[1])
        elif word in SEQUENCE_BLOCKS:
            depth += 1
        elif word == "end":
            depth -= 1
            assert depth >= 0, "an 'end' closes no block"
        elif word in ("else", "and", "autonumber", "activate", "deactivate"):
            continue
        elif word == "Note":
            assert re.match(r"^Note (over|left of|right of) [\w, ]+:\s*\S", line), f"bad note: {line}"
        else:
            found = message.match(line)
            assert found, f"not a message, note or block line: {line}"
            for name in found.groups():
                assert name in participants, f"{name!r} is not a declared participant: {line}"
    assert depth == 0, "a loop/alt/... block is not closed with 'end'"


def _xychart(lines: list[str]) -> dict:
    chart = {"series": []}
    for line in lines[1:]:
        word = line.split()[0]
        if word == "title":
            chart["title"] = re.match(r'^title "([^"]+)"$', line).group(1)
        elif word == "x-axis":
            chart["x"] = [item.strip() for item in re.search(r"\[(.*)\]", line).group(1).split(",")]
        elif word == "y-axis":
            assert re.match(r'^y-axis( "[^"]+")?( -?[\d.]+ --> -?[\d.]+)?$', line), f"bad y-axis: {line}"
        elif word in ("line", "bar"):
            chart["series"].append([float(v) for v in re.search(r"\[(.*)\]", line).group(1).split(",")])
        else:
            raise AssertionError(f"not an xychart line: {line}")
    return chart


@pytest.mark.parametrize("block", list(_mermaid_blocks()))
def test_mermaid_block_is_well_formed(block):
    lines = _lines(block)
    assert lines, "empty mermaid block"
    kind = lines[0].split()[0]
    assert kind in DIAGRAM_TYPES, f"unknown diagram type {kind!r}"
    _check_brackets(block)
    if kind in ("flowchart", "graph"):
        _check_flowchart(lines)
    elif kind == "sequenceDiagram":
        _check_sequence(lines)
    elif kind == "xychart-beta":
        chart = _xychart(lines)
        assert chart["series"], "a chart without data"
        for values in chart["series"]:
            assert len(values) == len(chart["x"]), f"{len(values)} values for {len(chart['x'])} categories"


def _diagram_blocks():
    return [block.values[0] for block in _mermaid_blocks() if block.id.startswith(f"{DIAGRAMS.name}-")]


def test_the_diagrams_page_draws_the_promised_diagrams():
    kinds = [_lines(block)[0].split()[0] for block in _diagram_blocks()]
    assert kinds.count("flowchart") >= 8 and kinds.count("sequenceDiagram") >= 2 and kinds.count("xychart-beta") >= 2, kinds
    readme = _text(REPO / "README.md")
    assert "](docs/diagrams.md)" in readme, "the README does not link to docs/diagrams.md"


def _code_and_links(text: str) -> list[str]:
    pieces = [m.group(2) for m in FENCE_RE.finditer(text)]
    without_fences = FENCE_RE.sub("", text)
    pieces += INLINE_CODE_RE.findall(without_fences)
    pieces += [target for target in LINK_RE.findall(without_fences) if "://" not in target]
    return pieces


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_mentioned_exists(doc):
    paths = {path.rstrip(".") for piece in _code_and_links(_text(doc)) for path in PATH_RE.findall(piece)}
    if doc in MAPPED:
        assert len(paths) > 10, f"expected many file references in {doc.name}, found {sorted(paths)}"
    missing = [path for path in sorted(paths)
               if not (glob.glob(str(REPO / path)) if "*" in path else (REPO / path).exists())]
    assert not missing, f"{doc.name} mentions files that do not exist: {missing}"


def _definitions(path: Path) -> set[str]:
    """Top-level functions, classes and constants, plus Class.method and Class.attribute."""
    names = set()
    for node in ast.parse(_text(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, ast.Assign):
                    names.update(f"{node.name}.{t.id}" for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_function_reference_names_a_real_definition(doc):
    references = {ref for piece in _code_and_links(_text(doc)) for ref in SYMBOL_RE.findall(piece)}
    if doc.name in ("README.md", "paper_mapping.md"):
        assert references, f"no file:name references in {doc.name}"
    wrong = []
    for file, name in sorted(references):
        path = REPO / file
        if not path.is_file():
            wrong.append(f"{file} (no such file)")
        elif name not in _definitions(path):
            wrong.append(f"{file}:{name}")
    assert not wrong, f"{doc.name} names definitions that do not exist: {wrong}"


def test_paper_mapping_covers_every_section_the_code_realises():
    text = _text(REPO / "docs" / "paper_mapping.md")
    for item in ("§3 ", "§3.1", "§3.2.1", "§3.2.2", "§3.2.3", "§3.3", "§3.4", "§3.5", "§5.1", "§5.3", "§5.4",
                 "§6.1", "Eq. (1)", "Eq. (2)", "Eq. (3)", "Table 3", "(A)", "(B)", "(C)", "(D)", "(E)"):
        assert item in text, f"docs/paper_mapping.md does not mention {item}"
    deviations = text.split("## Deviations", 1)[1]
    rows = [line for line in deviations.splitlines() if line.startswith("| ") and not line.startswith("| Topic")]
    assert len(rows) >= 10, "the deviation table lost rows"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE_RE.sub("", _text(path))
    slugs, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_reach_files_and_headings(doc):
    # Targets are relative to the page: docs/diagrams.md links images/…, the README docs/images/….
    text = FENCE_RE.sub("", _text(doc))
    for target in LINK_RE.findall(text):
        if "://" in target:
            continue
        file, _, anchor = target.partition("#")
        page = (doc.parent / file) if file else doc
        assert page.exists(), f"{doc.name}: link to missing file {file}"
        if anchor:
            assert anchor in _anchors(page), f"{doc.name}: no heading for #{anchor} in {page.name}"


def _chart(title_start: str) -> list[str]:
    for block in _diagram_blocks():
        lines = _lines(block)
        if any(line.startswith(f'title "{title_start}') for line in lines):
            return lines
    raise AssertionError(f"{DIAGRAMS.name} has no chart titled {title_start!r}…")


def test_learning_rate_chart_holds_eq3_values():
    chart = _xychart(_chart("Eq. (3)"))
    steps = [int(x) * 1000 for x in chart["x"]]
    assert len(chart["series"]) == 2
    for warmup, values in zip((4000, 8000), chart["series"]):
        expected = [round(noam_lr(step, 512, warmup) * 1e4, 2) for step in steps]
        assert values == expected, f"warmup {warmup}: chart {values} but Eq. (3) gives {expected}"


def test_label_smoothing_chart_holds_the_package_target():
    chart = _xychart(_chart("Smoothed target"))
    (values,) = chart["series"]
    vocab, gold = len(values), 3
    logits = torch.zeros(vocab, requires_grad=True)
    label_smoothed_cross_entropy(logits[None], torch.tensor([gold]), 0.1).backward()
    target = torch.softmax(logits.detach(), -1) - logits.grad  # ∂H(q, p)/∂z = p − q
    assert values == [round(v, 4) for v in target.tolist()]


def test_readme_keeps_the_quick_start_and_results_lines():
    readme = _text(REPO / "README.md")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert f"```bash\n{QUICK_START}```" in quick_start
    assert f"`{FAST_TESTS}`" in quick_start, "the quick start lost the fast test command"
    test_command = QUICK_START.splitlines()[-1]
    ci = [line for line in _text(REPO / ".ci" / "run").splitlines() if line and not line.startswith("#")]
    assert ci[-1] == test_command, f".ci/run ends with {ci[-1]!r}, not the README's test command"
    results = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
    assert "Filled in from measured runs: see hub_card/README.md and benchmarks/RESULTS.md." in results


def test_readme_lists_every_example():
    readme = _text(REPO / "README.md")
    for script in sorted((REPO / "examples").glob("[0-9][0-9]_*.py")):
        assert f"examples/{script.name}" in readme, f"README does not list {script.name}"


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "docs" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_graph_is_current():
    graph = _import_graph()
    committed = graph.current(_text(graph.TARGET))
    assert committed == graph.render(), (
        "the import graph in docs/architecture.md no longer matches the code: run python docs/import_graph.py"
    )


def test_model_imports_only_model():
    # What save_pretrained copies into a checkpoint must load without the rest of the package.
    graph = _import_graph()
    edges = graph.find_imports(graph.find_modules())
    outside = [f"{s} → {t}" for s, t in edges if graph.room(s) == "model" and graph.room(t) != "model"]
    assert not outside, f"model/ imports from outside model/: {outside}"
    assert any(graph.room(s) == graph.room(t) == "model" for s, t in edges), "no imports found inside model/"
