"""The report, written whole from the finished rows: README.md (the table beside the paper's numbers, each change
from the base beside the paper's, seed noise, failed and missing rows), results.json and table3.png. A change no
larger than the spread between the base's seeds is "within noise"; with one seed nothing is."""

from __future__ import annotations

import time
from pathlib import Path

from .rows import PAPER_BASE_RESULT, PAPER_FINDINGS, Row, table_order
from .runs import write_json

COLUMNS = ("row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "ε_ls", "train steps", "PPL (dev)",
           "BLEU (dev)", "params ×10^6", "paper PPL (dev)", "paper BLEU (dev)", "paper params ×10^6")
CONFIG_COLUMNS = ("num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v", "dropout", "label_smoothing")
SYMBOLS = {"num_layers": "N", "num_heads": "h", "dropout": "P_drop", "label_smoothing": "ε_ls",
           "positional_encoding": "positions"}
BLANK = "—"
FIGURE = "table3.png"


def number(value, digits: int, sign: str = "", unit: str = "") -> str:
    return BLANK if value is None else f"{value:{sign}.{digits}f}{unit}"


def table(header, rows) -> list[str]:
    return ["| " + " | ".join(str(cell) for cell in cells) + " |" for cells in (header, ["---"] * len(header), *rows)]


def results_table(results: list[dict], failures: dict[str, dict], rows: dict[str, Row]) -> list[str]:
    """The table in Table 3's columns, finished and failed rows in table order."""
    lines, entries = [], [(r["row"], r) for r in results] + [(row_id, None) for row_id in failures if row_id in rows]
    for row_id, result in sorted(entries, key=lambda entry: table_order(entry[0])):
        config = result["config"] if result else rows[row_id].config
        paper = (result.get("paper") if result else rows[row_id].paper) or {}
        if result is None:
            label, measured = f"{row_id} (failed)", ["failed"] * 4
        else:
            label = row_id + (f" (seed {result['seed']})" if result["group"] == "base" and row_id != "base" else
                              " (learned positions)" if config.get("positional_encoding") == "learned" else
                              " (ours)" if not result.get("paper") else "")
            dev = result["dev"]
            measured = [result["train"]["steps"], number(dev["ppl"], 2), number(dev["bleu"], 1),
                        number(dev["parameters"] / 1e6, 2)]
        lines.append([label, *(config[name] for name in CONFIG_COLUMNS), *measured, number(paper.get("ppl"), 2),
                      number(paper.get("bleu"), 1), BLANK if paper.get("params") is None else paper["params"]])
    return table(COLUMNS, lines)


def base_noise(results: list[dict]) -> dict | None:
    """Spread of PPL and BLEU over the base's seeds, or None with fewer than two."""
    bases = [r for r in results if r["group"] == "base"]
    if len(bases) < 2:
        return None
    ppls, bleus = [r["dev"]["ppl"] for r in bases], [r["dev"]["bleu"] for r in bases]
    return {"seeds": [r["seed"] for r in bases], "ppl": ppls, "bleu": bleus,
            "ppl_spread_percent": 100 * (max(ppls) - min(ppls)) / min(ppls), "bleu_spread": max(bleus) - min(bleus)}


def reading(ours: float, paper: float | None, noise: float | None, lower_is_better: bool) -> str:
    if noise is not None and abs(ours) <= noise:
        return "within noise"
    if abs(ours) < 1e-9:
        return "no change"
    if paper is None:
        return "better" if (ours < 0) == lower_is_better else "worse"
    if abs(paper) < 1e-9:
        return "differs (the paper: no change)"
    return "as the paper" if (ours > 0) == (paper > 0) else "opposite to the paper"


def changes_from_base(results: list[dict]) -> list[dict]:
    """Each non-base row's change in PPL (percent) and BLEU (points) from the base, ours and the paper's."""
    base = next((r["dev"] for r in results if r["row"] == "base"), None)
    if base is None:
        return []
    noise, out = base_noise(results), []
    for result in sorted(results, key=lambda r: table_order(r["row"])):
        if result["group"] == "base":
            continue
        paper = result.get("paper") or {}
        ppl, bleu = 100 * (result["dev"]["ppl"] / base["ppl"] - 1), result["dev"]["bleu"] - base["bleu"]
        paper_ppl = 100 * (paper["ppl"] / PAPER_BASE_RESULT["ppl"] - 1) if paper.get("ppl") else None
        paper_bleu = paper["bleu"] - PAPER_BASE_RESULT["bleu"] if paper.get("bleu") else None
        out.append({
            "row": result["row"], "group": result["group"], "changes": result["changes"],
            "ppl_change_percent": ppl, "paper_ppl_change_percent": paper_ppl,
            "bleu_change": bleu, "paper_bleu_change": paper_bleu,
            "ppl_reading": reading(ppl, paper_ppl, noise and noise["ppl_spread_percent"], lower_is_better=True),
            "bleu_reading": reading(bleu, paper_bleu, noise and noise["bleu_spread"], lower_is_better=False),
        })
    return out


def write_figure(path: Path, changes: list[dict], noise: dict | None, title: str) -> None:
    """Each row's change from the base, beside the paper's, in two panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from modeling_vaswani.outputs import write_file

    by_row = {c["row"]: c for c in reversed(changes)}  # the table's order, top to bottom
    rows, positions = list(by_row), range(len(by_row))
    figure, axes = plt.subplots(1, 2, figsize=(10, 0.32 * len(rows) + 2), sharey=True)
    for axis, (ours_key, paper_key, label, noise_key) in zip(axes, (
            ("ppl_change_percent", "paper_ppl_change_percent", "dev PPL change from the base (%)", "ppl_spread_percent"),
            ("bleu_change", "paper_bleu_change", "dev BLEU change from the base (points)", "bleu_spread"))):
        axis.barh(positions, [by_row[r][ours_key] for r in rows], color="tab:blue", label="this miniature")
        paper = [(i, by_row[r][paper_key]) for i, r in enumerate(rows) if by_row[r][paper_key] is not None]
        if paper:
            axis.plot([v for _, v in paper], [i for i, _ in paper], "D", color="black", markersize=5,
                      label="the paper (Table 3)")
        if noise is not None:
            axis.axvspan(-noise[noise_key], noise[noise_key], color="0.85", zorder=0,
                         label=f"base seed spread ({len(noise['seeds'])} seeds)")
        axis.axvline(0, color="0.4", linewidth=0.8)
        axis.set_xlabel(label)
        axis.set_yticks(list(positions), rows)
        axis.grid(axis="x", alpha=0.3)
    axes[0].legend(fontsize=8, loc="best")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    with write_file(path, "wb") as handle:  # written beside and renamed, as every output
        figure.savefig(handle, dpi=110, format="png")
    plt.close(figure)


def write_report(output: Path, all_rows: list[Row], settings: dict, budget: str, command: str, machine: dict,
                 hardware: str, results: list[dict], failures: dict[str, dict]) -> dict:
    """Write README.md, results.json and the figure into `output`; the JSON's content."""
    from modeling_vaswani.outputs import write_file

    output, results = Path(output), sorted(results, key=lambda r: table_order(r["row"]))
    failures = {row_id: f for row_id, f in failures.items() if row_id not in {r["row"] for r in results}}
    done = {r["row"] for r in results} | set(failures)
    noise, changes = base_noise(results), changes_from_base(results)
    if changes:
        write_figure(output / FIGURE, changes, noise, f"Table 3 in miniature: {budget} per row, {hardware}")
    report = {"command": command, "hardware": hardware, "machine": machine, "settings": settings, "budget": budget,
              "written": time.strftime("%Y-%m-%d %H:%M:%S %z"), "rows": results, "changes_from_base": changes,
              "noise": noise, "failed": list(failures.values()),
              "not_run": [row.id for row in all_rows if row.id not in done], "paper_base": PAPER_BASE_RESULT,
              "figure": FIGURE if changes else None}
    write_json(output / "results.json", report)
    with write_file(output / "README.md", encoding="utf-8") as handle:
        handle.write(readme(report, failures, {row.id: row for row in all_rows}))
    return report


def readme(report: dict, failures: dict, rows: dict) -> str:
    s, results, changes, noise = report["settings"], report["rows"], report["changes_from_base"], report["noise"]
    sizes = ", ".join(map(str, sorted({r["dev"]["dev_sentences"] for r in results})))
    lines = [
        "# Table 3 in miniature: results", "",
        "Written by `scripts/table3.py` (how to run it and how to read each row: [docs/table3.md](../table3.md)). "
        "Everything below comes from the rows' result files in `rows/`; rerunning the command goes on with the rows "
        "still missing and rewrites this page.", "",
        f"- Command: `{report['command']}`",
        f"- Machine: {report['hardware']}; torch {report['machine'].get('torch')}, "
        f"transformers {report['machine'].get('transformers')}",
        f"- Budget: {report['budget']} per row (scripts/train.py, {s['max_tokens']} tokens a step, Eq. (3) "
        f"warm-up {s['warmup_steps']} steps, data seed {s['data_seed']}); base `{s['base']}`",
        f"- Dev set: Multi30k validation{f' ({sizes} sentences)' if sizes else ''}; PPL per "
        f"subword without label smoothing; BLEU {'beam ' + str(s['num_beams']) if s['num_beams'] > 1 else 'greedy'}, "
        "cased sacreBLEU, no checkpoint averaging", "",
        "## The table", "",
        "Table 3's columns; the last three are the paper's own numbers for the row it scales (newstest2013, "
        f"100K steps of a 65M-parameter base; {BLANK} where the paper leaves the cell blank).", "",
        *results_table(results, failures, rows), "",
        "## Each row beside the paper", ""]
    if changes:
        lines += ["Change from the base row (ours from our base, the paper's from its base). Lower PPL is better, "
                  "higher BLEU is better.", "",
                  *table(("row", "changed (ours)", "PPL change", "paper's", "reading", "BLEU change", "paper's",
                          "reading"),
                         [[c["row"], ", ".join(f"{SYMBOLS.get(k, k)} {v}" for k, v in c["changes"].items())
                           or "the base", number(c["ppl_change_percent"], 1, "+", " %"),
                           number(c["paper_ppl_change_percent"], 1, "+", " %"), c["ppl_reading"],
                           number(c["bleu_change"], 1, "+"), number(c["paper_bleu_change"], 1, "+"), c["bleu_reading"]]
                          for c in changes]), ""]
        if report["figure"]:
            lines += [f"![Each row's change from the base, beside the paper's]({FIGURE})", ""]
        lines += [f"- ({group}) the paper: {finding}." for group, finding in PAPER_FINDINGS.items()
                  if any(c["group"] == group for c in changes)] + [""]
    else:
        lines += ["No change from the base to show yet: the base row and at least one other must be finished.", ""]
    lines += ["## Run-to-run noise", "", (
        f"The base trained with seeds {', '.join(map(str, noise['seeds']))} (same data order): dev PPL "
        f"{', '.join(f'{v:.2f}' for v in noise['ppl'])} (spread {noise['ppl_spread_percent']:.1f} %), "
        f"dev BLEU {', '.join(f'{v:.1f}' for v in noise['bleu'])} (spread {noise['bleu_spread']:.1f}). "
        "A row's change no larger than this spread is marked within noise." if noise else
        "Not measured: the base ran with one seed (`--seeds 2` runs a second)."), ""]
    if failures:
        lines += ["## Rows that failed", "", *(f"- {f['row']}: while {f['stage']}: {f['reason']} (log: `{f['log']}`)"
                                              for f in failures.values()), ""]
    if report["not_run"]:
        lines += ["## Rows not run yet", "", ", ".join(report["not_run"]), ""]
    return "\n".join(lines)
