"""Each row's untrained model (models.py) trained by `scripts/train.py` in a process of its own for the same budget,
then scored into <output>/rows/<row>.json. A finished row is skipped, a failing one leaves <row>.failed.json while
the others go on, and rows made with other settings are never mixed in. Standard library only at import."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from .rows import Row

REPO = Path(__file__).resolve().parents[2]
TRAIN_SCRIPT = REPO / "scripts" / "train.py"


class MixedTableError(ValueError):  # rows already in the output folder were made with other settings
    pass


@dataclass(frozen=True)
class TableSettings:
    """What every row shares; two tables are comparable only when these agree."""

    minutes: float | None = None  # scripts/train.py --max_train_minutes, per row
    steps: int | None = None  # --max_steps, per row
    base: str = "multi30k"
    data_seed: int = 42
    vocab_size: int = 8000
    max_tokens: int = 2048
    warmup_steps: int = 300
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    num_beams: int = 4
    source_lang: str = "en"
    target_lang: str = "de"

    def __post_init__(self):
        if (self.minutes is None) == (self.steps is None):
            raise ValueError("give the budget of every row: --minutes or --steps (one of the two).")

    def budget(self) -> str:
        return f"{self.minutes:g} minutes" if self.minutes is not None else f"{self.steps} steps"


def read_results(output: Path, failed: bool = False) -> dict[str, dict]:
    """{row id: its result} of every finished row in `output`; with `failed`, of every failure report."""
    from modeling_vaswani.model.strict_json import read_json

    folder = Path(output) / "rows"
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {path.name.removesuffix(".json").removesuffix(".failed"): read_json(path) for path in paths
            if path.name.endswith(".failed.json") == failed}


def check_same_settings(output: Path, settings: TableSettings) -> None:
    wanted = asdict(settings)
    for row_id, result in read_results(output).items():
        differing = sorted(name for name in wanted if result["settings"].get(name) != wanted[name])
        if differing:
            said = ", ".join(f"{name} {result['settings'].get(name)!r} there, {wanted[name]!r} now" for name in differing)
            raise MixedTableError(f"{output}/rows/{row_id}.json was made with other settings ({said}); give another "
                                  "--output, or the same settings to go on with that table.")


def train_command(row: Row, settings: TableSettings, start_dir: Path, model_dir: Path, threads: int) -> list[str]:
    command = [sys.executable, str(TRAIN_SCRIPT), "--model_name_or_path", str(start_dir), "--output_dir",
               str(model_dir), "--overwrite_output_dir", "--seed", str(row.seed),
               "--data_seed", str(settings.data_seed), "--max_tokens", str(settings.max_tokens),
               "--warmup_steps_noam", str(settings.warmup_steps), "--threads", str(threads),
               "--source_lang", settings.source_lang, "--target_lang", settings.target_lang,
               # Table 3 scores each row once, at the end (models.py); no evaluation or checkpoint on the way.
               "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
               "--logging_steps", "50"]
    command += (["--max_train_minutes", f"{settings.minutes:g}", "--num_train_epochs", "100000"]
                if settings.minutes is not None else ["--max_steps", str(settings.steps)])
    return command + (["--max_train_samples", str(settings.max_train_samples)] if settings.max_train_samples else [])


def training_facts(model_dir: Path) -> dict:
    """Steps, epochs and the last logged training loss, from the Trainer's trainer_state.json."""
    from modeling_vaswani.model.strict_json import read_json

    state = read_json(model_dir / "trainer_state.json")
    losses = [entry["loss"] for entry in state.get("log_history", []) if "loss" in entry]
    return {"steps": state.get("global_step"), "epochs": round(state.get("epoch") or 0.0, 3),
            "last_training_loss": losses[-1] if losses else None}


class TableRun:
    """The rows of one table, run in order (or `jobs` at a time), each trained in its own process."""

    def __init__(self, settings: TableSettings, output: Path, runs_dir: Path, threads: int = 1, jobs: int = 1,
                 command: str = "", log=print):
        # Absolute: the rows' processes run from the repository, wherever this one was started.
        self.settings, self.output, self.runs_dir = settings, Path(output), Path(runs_dir).resolve()
        self.threads, self.jobs, self.command, self.log = threads, jobs, command, log
        # Tokenizing, building and scoring happen in this process: one at a time, with `threads` threads.
        self._in_process = threading.Lock()
        self._tokenizer = None

    def run(self, rows: list[Row]) -> dict[str, list[str]]:
        """Train and score every row not yet done; {"done", "skipped", "failed"}: row ids."""
        check_same_settings(self.output, self.settings)
        (self.output / "rows").mkdir(parents=True, exist_ok=True)
        finished = read_results(self.output)
        outcome = {"done": [], "skipped": [row.id for row in rows if row.id in finished], "failed": []}
        for row_id in outcome["skipped"]:
            self.log(f"{row_id}: already done ({self.output / 'rows' / row_id}.json), skipped")
        todo = [row for row in rows if row.id not in finished]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            for row, ok in zip(todo, pool.map(self.run_row, todo)):
                outcome["done" if ok else "failed"].append(row.id)
        return outcome

    def run_row(self, row: Row) -> bool:
        """Train and score one row; False (with a .failed.json) if any stage fails."""
        run_dir, s, stage = self.runs_dir / row.id, self.settings, "preparing the starting model"
        log_path = run_dir / "train.log"
        # A time-budgeted row is taken for hung after twice its budget and 10 minutes.
        timeout = None if s.minutes is None else (2 * s.minutes + 10) * 60
        try:
            with self._in_process:
                start_dir = self.prepare(row, run_dir)
            stage = "training (scripts/train.py)"
            command = train_command(row, s, start_dir, run_dir / "model", self.threads)
            self.log(f"{row.id}: training {row.changes or 'the base'} for {s.budget()} (log: {log_path})")
            began = time.monotonic()
            with open(log_path, "w", encoding="utf-8") as log:
                log.write("$ " + shlex.join(command) + "\n")
                log.flush()
                env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "TOKENIZERS_PARALLELISM": "false",
                       "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
                exit_code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                           timeout=timeout).returncode
            minutes = (time.monotonic() - began) / 60
            if exit_code != 0:
                return self.failed(row, stage, f"scripts/train.py exited with status {exit_code}", log_path)
            facts = training_facts(run_dir / "model")
            stage = "scoring on the dev set"
            with self._in_process:
                scores = self.score(run_dir / "model")
        except subprocess.TimeoutExpired:
            return self.failed(row, stage, f"scripts/train.py ran past {timeout / 60:.0f} minutes", log_path)
        except Exception as error:  # one row's failure is reported; the others go on
            return self.failed(row, stage, f"{type(error).__name__}: {' '.join(str(error).split())}", log_path)
        # The command as typed in the repository: python scripts/train.py, paths inside it relative.
        shown = [str(Path(p).relative_to(REPO)) if Path(p).is_absolute() and Path(p).is_relative_to(REPO) else p
                 for p in command[1:]]
        result = {"row": row.id, "group": row.group, "config": row.config, "changes": row.changes, "seed": row.seed,
                  "paper": row.paper, "note": row.note, "settings": asdict(s), "threads": self.threads,
                  "train": {**facts, "minutes": round(minutes, 2), "command": shlex.join(["python", *shown])},
                  "dev": scores}
        path = self.output / "rows" / f"{row.id}.json"
        write_json(path, result)
        (self.output / "rows" / f"{row.id}.failed.json").unlink(missing_ok=True)
        self.log(f"{row.id}: {facts['steps']} steps, dev PPL {scores['ppl']:.2f}, dev BLEU {scores['bleu']:.1f}, "
                 f"{scores['parameters'] / 1e6:.2f}M parameters → {path}")
        return True

    def failed(self, row: Row, stage: str, reason: str, log_path: Path) -> bool:
        text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.is_file() else ""
        tail = [line for line in text.splitlines() if line.strip()][-25:]
        write_json(self.output / "rows" / f"{row.id}.failed.json",
                   {"row": row.id, "stage": stage, "reason": reason, "log": str(log_path), "log_tail": tail})
        self.log(f"{row.id}: FAILED while {stage}: {reason}" + (f"\n    {tail[-1]}" if tail else "")
                 + f"\n    (the other rows go on; full log: {log_path})")
        return False

    def prepare(self, row: Row, run_dir: Path) -> Path:
        import transformers

        from modeling_vaswani.threads import use_threads

        from .models import shared_tokenizer, write_starting_model

        transformers.utils.logging.disable_progress_bar()  # one bar per saved or loaded model would be noise
        use_threads(requested=self.threads)
        if self._tokenizer is None:
            s = self.settings
            name = f"tokenizer-{s.source_lang}{s.target_lang}-v{s.vocab_size}-n{s.max_train_samples or 'all'}"
            self._tokenizer = shared_tokenizer(self.runs_dir / name, s.source_lang, s.target_lang, s.vocab_size,
                                               s.max_train_samples)
        write_starting_model(run_dir / "start", row.config, self._tokenizer, row.seed)
        return run_dir / "start"

    def score(self, model_dir: Path) -> dict:
        from modeling_vaswani.threads import use_threads
        from modeling_vaswani.training.data import multi30k_pairs

        from .models import score_trained_row

        use_threads(requested=self.threads)
        s = self.settings
        sources, references = multi30k_pairs("validation", s.source_lang, s.target_lang, s.max_eval_samples)
        return score_trained_row(model_dir, sources, references, num_beams=s.num_beams)


def write_json(path: Path, value) -> None:
    """Written beside `path` and renamed: a table stopped part-way never leaves half a file."""
    from modeling_vaswani.outputs import write_file

    with write_file(path, encoding="utf-8") as handle:
        handle.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
