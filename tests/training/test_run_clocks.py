"""run_clocks: the run's minutes, the time budget and the checkpoints every so many minutes, on a hand-set clock."""

from types import SimpleNamespace

import pytest
from transformers import TrainerControl

from modeling_vaswani.training import run_clocks
from modeling_vaswani.training.run_clocks import RunClock, SaveEveryMinutes, TimeBudget
from modeling_vaswani.training.run_folder import read_run_info, start_segment

MAIN, OTHER = SimpleNamespace(is_world_process_zero=True), SimpleNamespace(is_world_process_zero=False)


@pytest.fixture
def now(monkeypatch):
    """The clock the callbacks read, set by hand: now[0] is the time in seconds."""
    clock = [1000.0]
    monkeypatch.setattr(run_clocks.time, "monotonic", lambda: clock[0])
    return clock


@pytest.fixture
def record(tmp_path):
    start_segment(tmp_path, {"command": "python scripts/train.py", "hardware": "CPU"}, {}, resuming=False)
    return lambda: read_run_info(tmp_path)["segments"][-1]["minutes"]


def test_the_run_clock_writes_minutes_and_steps_from_the_main_process_and_logs_the_whole_runs(tmp_path, now, record):
    clock = RunClock(tmp_path)
    clock.on_train_end(None, MAIN, None)  # before training began: no clock yet
    assert record() == 0.0
    state = SimpleNamespace(log_history=[{"loss": 3.0}], is_world_process_zero=True, global_step=0)
    clock.on_train_begin(None, state, None)
    now[0] += 90
    state.global_step = 40
    clock.on_log(None, state, None)
    clock.on_save(None, state, None)
    assert record() == 1.5 and state.log_history[-1]["run_minutes"] == 1.5
    assert read_run_info(tmp_path)["segments"][-1]["steps"] == 40  # the segment's steps beside its minutes
    now[0] += 60
    clock.on_save(None, OTHER, None)
    assert record() == 1.5
    clock.on_train_end(None, MAIN, None)
    assert record() == 2.5
    # A resumed run's log entries count the earlier segments' minutes too.
    start_segment(tmp_path, {"command": "python scripts/train.py --resume_from_checkpoint c", "hardware": "CPU"},
                  {}, resuming=True)
    resumed = RunClock(tmp_path, start=now[0])
    resumed.on_train_begin(None, MAIN, None)
    now[0] += 30
    state.log_history.append({"eval_bleu": 20.0})
    resumed.on_log(None, state, None)
    assert state.log_history[-1]["run_minutes"] == 3.0


def _step(budget, now, seconds, state=None, eval_strategy="steps"):
    """One optimizer step of `seconds` on the hand-set clock; the control after it."""
    args, control = SimpleNamespace(eval_strategy=eval_strategy), TrainerControl()
    budget.on_step_begin(args, state, control)
    now[0] += seconds
    return budget.on_step_end(args, state, control)


@pytest.mark.parametrize("eval_strategy", ["steps", "no"])
def test_the_budget_counts_from_the_runs_start_and_leaves_time_for_the_closing_work(now, eval_strategy):
    """10 minutes from the script's start, 2 spent loading; steps of 30 s; an evaluation timed at 60 s and a
    checkpoint at 10 s: the closing work (an evaluation, two saves) counts 1.25 × (60 + 2 × 10) = 100 s."""
    assert not _step(TimeBudget(1), now, 120).should_training_stop  # before training began: nothing to stop
    start = now[0]
    now[0] += 120
    budget = TimeBudget(10, start=start, evaluations_after=1, saves_after=1)
    args, state = SimpleNamespace(eval_strategy=eval_strategy), SimpleNamespace(global_step=0)
    budget.on_train_begin(args, state, TrainerControl())
    assert budget.minutes() == 2
    control = _step(budget, now, 30)
    budget.on_evaluate(args, state, control)  # nothing timed yet: no mark before the first step end
    now[0] += 60
    budget.on_evaluate(args, state, control)
    now[0] += 10
    budget.on_save(args, state, control)
    assert (budget.evaluation_seconds, budget.save_seconds, budget.closing_seconds()) == (60, 10, pytest.approx(100))
    stops = []
    while not stops or not stops[-1]:
        control = _step(budget, now, 30, state=state, eval_strategy=eval_strategy)
        stops.append(control.should_training_stop)
    elapsed = now[0] - start
    assert elapsed + 100 <= 600 < elapsed + 30 + 100  # the last step that fit, and no more
    assert control.should_save and control.should_log and control.should_evaluate is (eval_strategy == "steps")
    assert budget.stopped_at == (0, elapsed / 60)


def test_estimates_stand_in_until_timed(now):
    budget = TimeBudget(1, evaluations_after=2, evaluation_seconds=20)
    budget.on_train_begin(SimpleNamespace(), SimpleNamespace(), TrainerControl())
    assert budget.closing_seconds() == pytest.approx(1.25 * 40)
    assert not _step(budget, now, 1).should_training_stop  # 1 + 1 + 50 < 60
    assert _step(budget, now, 8).should_training_stop  # 9 + 8 + 50 >= 60
    model = SimpleNamespace(parameters=lambda: [SimpleNamespace(numel=lambda: 10_000_000)])
    budget = TimeBudget(1, saves_after=1)
    budget.on_train_begin(SimpleNamespace(), SimpleNamespace(), TrainerControl(), model=model)
    assert budget.save_seconds == pytest.approx(10_000_000 * 12 / 100e6)  # the model's size at 100 MB/s


def test_save_every_minutes_saves_at_each_interval_at_the_last_step_and_after_any_save(now):
    saver, args = SaveEveryMinutes(10), SimpleNamespace()
    saver.on_train_begin(args, SimpleNamespace(), TrainerControl())
    saved = []
    for step in range(1, 101):  # a step every 15 s, 100 steps: 25 minutes
        now[0] += 15
        state = SimpleNamespace(global_step=step, max_steps=100)
        if step == 50:
            saver.on_save(args, state, TrainerControl())  # a checkpoint for another reason restarts the interval
        elif saver.on_step_end(args, state, TrainerControl()).should_save:
            saved.append(step)
            saver.on_save(args, state, TrainerControl())
    assert saved == [40, 90, 100]


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
