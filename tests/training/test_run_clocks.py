"""run_clocks: the run's minutes, the time budget that ends training and the checkpoints every so many minutes,
all on a clock set by hand."""

from types import SimpleNamespace

import pytest
from transformers import TrainerControl

from modeling_vaswani.training import run_clocks
from modeling_vaswani.training.run_clocks import RunClock, SaveEveryMinutes, TimeBudget
from modeling_vaswani.training.run_folder import read_run_info, start_segment

ABOUT = {"parameters": "1,234", "torch": "2.x", "transformers": "5.x"}
CPU = {"command": "python scripts/train.py --seed 1", "hardware": "CPU: X, 1 thread"}


def test_run_clock_writes_the_minutes_since_training_began(tmp_path, monkeypatch):
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    now = [1000.0]
    monkeypatch.setattr(run_clocks.time, "monotonic", lambda: now[0])
    clock = RunClock(tmp_path)
    main, other = SimpleNamespace(is_world_process_zero=True), SimpleNamespace(is_world_process_zero=False)
    clock.on_train_begin(None, main, None)
    now[0] += 90
    clock.on_save(None, main, None)
    assert read_run_info(tmp_path)["segments"][-1]["minutes"] == 1.5
    now[0] += 60
    clock.on_save(None, other, None)  # only the main process writes
    assert read_run_info(tmp_path)["segments"][-1]["minutes"] == 1.5
    clock.on_train_end(None, main, None)
    assert read_run_info(tmp_path)["segments"][-1]["minutes"] == 2.5


@pytest.fixture
def fake_clock(monkeypatch):
    """The clock RunClock and TimeBudget read, set by hand: now[0] is the current time in seconds."""
    now = [1000.0]
    monkeypatch.setattr(run_clocks.time, "monotonic", lambda: now[0])
    return now


@pytest.mark.parametrize("eval_strategy,evaluates", [("steps", True), ("no", False)])
def test_time_budget_stops_with_a_checkpoint_once_the_minutes_are_spent(fake_clock, eval_strategy, evaluates):
    budget, args, state = TimeBudget(2), SimpleNamespace(eval_strategy=eval_strategy), SimpleNamespace()
    control = TrainerControl()
    budget.on_train_begin(args, state, control)
    fake_clock[0] += 119
    budget.on_step_end(args, state, control)
    assert not (control.should_training_stop or control.should_save or control.should_evaluate)
    fake_clock[0] += 1
    budget.on_step_end(args, state, control)
    assert control.should_training_stop and control.should_save
    assert control.should_evaluate is evaluates


def test_time_budget_and_run_clock_read_the_same_clock(tmp_path, fake_clock):
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    main = SimpleNamespace(is_world_process_zero=True)
    clock, budget, control = RunClock(tmp_path), TimeBudget(1.5), TrainerControl()
    for callback in (clock, budget):
        callback.on_train_begin(None, main, control)
    fake_clock[0] += 90
    budget.on_step_end(SimpleNamespace(eval_strategy="no"), main, control)
    clock.on_train_end(None, main, control)
    assert control.should_training_stop
    assert read_run_info(tmp_path)["segments"][-1]["minutes"] == budget.minutes() == 1.5


def test_the_clock_does_not_run_before_training_begins(tmp_path, fake_clock):
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    budget, control = TimeBudget(0.001), TrainerControl()
    assert budget.minutes() is None
    budget.on_step_end(SimpleNamespace(eval_strategy="no"), None, control)
    assert not control.should_training_stop
    RunClock(tmp_path).on_train_end(None, SimpleNamespace(is_world_process_zero=True), control)
    assert read_run_info(tmp_path)["segments"][-1]["minutes"] == 0.0


# --- the budget covers the closing work, timed as training goes ------------------------------------

def _step(budget, clock, seconds, state=None, args=None, control=None):
    """One optimizer step of `seconds` on the fake clock; returns the control after it."""
    args = args or SimpleNamespace(eval_strategy="steps")
    control = control or TrainerControl()
    budget.on_step_begin(args, state, control)
    clock[0] += seconds
    return budget.on_step_end(args, state, control)


def test_the_budget_counts_from_the_runs_start_and_leaves_time_for_the_closing_work(fake_clock):
    """10 minutes from the script's start: 2 already spent loading; steps of 30 s; one evaluation
    timed at 60 s and a checkpoint at 10 s before the closing work (an evaluation, a checkpoint,
    the final save) must fit. With the 25% margin that work counts 1.25 × (60 + 2 × 10) = 100 s."""
    start = fake_clock[0]
    fake_clock[0] += 120
    budget = TimeBudget(10, start=start, evaluations_after=1, saves_after=1)
    args, state = SimpleNamespace(eval_strategy="steps"), SimpleNamespace(global_step=0)
    budget.on_train_begin(args, state, TrainerControl())
    assert budget.minutes() == 2
    control = _step(budget, fake_clock, 30)
    budget.on_evaluate(args, state, control)  # nothing timed yet: no mark before the first step end
    fake_clock[0] += 60
    budget.on_evaluate(args, state, control)
    fake_clock[0] += 10
    budget.on_save(args, state, control)
    assert (budget.evaluation_seconds, budget.save_seconds) == (60, 10)
    assert budget.closing_seconds() == pytest.approx(100)
    # Now 220 s in. Each step may go on while elapsed + next step (30 s) + 100 s < 600 s.
    stops = []
    for _ in range(20):
        control = _step(budget, fake_clock, 30, state=state)
        stops.append(control.should_training_stop)
        if control.should_training_stop:
            break
    elapsed = fake_clock[0] - start
    assert stops[-1] and not any(stops[:-1])
    assert elapsed + 100 <= 600 < elapsed + 30 + 100  # the last step that fit, and no more
    assert control.should_save and control.should_evaluate and control.should_log
    assert budget.stopped_at == (0, elapsed / 60)


def test_before_any_evaluation_the_estimate_stands_in(fake_clock):
    budget = TimeBudget(1, evaluations_after=2, evaluation_seconds=20)
    budget.on_train_begin(SimpleNamespace(), SimpleNamespace(), TrainerControl())
    assert budget.closing_seconds() == pytest.approx(1.25 * 40)
    assert not _step(budget, fake_clock, 1).should_training_stop  # 1 + 1 + 50 < 60
    assert _step(budget, fake_clock, 8).should_training_stop  # 9 + 8 + 50 >= 60


def test_a_save_is_estimated_from_the_models_size_until_one_is_timed(fake_clock):
    model = SimpleNamespace(parameters=lambda: [SimpleNamespace(numel=lambda: 10_000_000)])
    budget = TimeBudget(1, saves_after=1)
    budget.on_train_begin(SimpleNamespace(), SimpleNamespace(), TrainerControl(), model=model)
    assert budget.save_seconds == pytest.approx(10_000_000 * 12 / 100e6)


def test_a_budget_must_be_positive():
    for minutes in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            TimeBudget(minutes)
        with pytest.raises(ValueError, match="positive"):
            SaveEveryMinutes(minutes)


# --- §6.1: a checkpoint every N minutes -------------------------------------------------------------

def test_save_every_minutes_saves_at_each_interval_and_at_the_last_step(fake_clock):
    saver = SaveEveryMinutes(10)
    args, control = SimpleNamespace(), TrainerControl()
    saver.on_train_begin(args, SimpleNamespace(), control)
    saved = []
    for step in range(1, 101):  # a step every 15 s, 100 steps: 25 minutes
        fake_clock[0] += 15
        state = SimpleNamespace(global_step=step, max_steps=100)
        control = saver.on_step_end(args, state, TrainerControl())
        if control.should_save:
            saved.append(step)
            saver.on_save(args, state, control)
    assert saved == [40, 80, 100]  # 10 and 20 minutes in, then the end


def test_a_checkpoint_for_another_reason_restarts_the_interval(fake_clock):
    saver = SaveEveryMinutes(1)
    args = SimpleNamespace()
    saver.on_train_begin(args, SimpleNamespace(), TrainerControl())
    state = SimpleNamespace(global_step=1, max_steps=100)
    fake_clock[0] += 50
    saver.on_save(args, state, TrainerControl())  # an epoch's checkpoint
    fake_clock[0] += 50
    assert not saver.on_step_end(args, state, TrainerControl()).should_save
    fake_clock[0] += 10
    assert saver.on_step_end(args, state, TrainerControl()).should_save


# --- the output folder ------------------------------------------------------------------------------


def test_the_flags_choose_the_clocks(tmp_path):
    plain = SimpleNamespace(save_every_minutes=None, max_train_minutes=None, average_last=0)
    clocks = run_clocks.run_clocks(plain, tmp_path, evaluating=True, start=0.0)
    assert clocks.callbacks == [clocks.record] and clocks.budget is None
    timed = SimpleNamespace(save_every_minutes=10, max_train_minutes=30, average_last=5)
    clocks = run_clocks.run_clocks(timed, tmp_path, evaluating=True, start=0.0)
    assert [type(clock) for clock in clocks.callbacks] == [RunClock, SaveEveryMinutes, TimeBudget]
    # After the last step: the final and the averaged model's evaluations, the final folder and the average.
    assert (clocks.budget.evaluations_after, clocks.budget.saves_after) == (2, 6)
    assert clocks.record.start == clocks.budget.start == 0.0
