"""The budget trainer.max_time followed by the clock: the cosine's progress is the elapsed share of the budget, the
rate never rises after the warm-up however the step times vary, and training stops (mid-epoch if need be) leaving
the time of one last validation, which then runs."""

from __future__ import annotations

import math

import lightning as L
import pytest
import torch
from torch import nn

from attend.callbacks import FollowTheClock
from attend.callbacks.time_budget import follow_clock
from attend.optim import WarmupCosine, warmup_cosine
from tests.helpers.time_budget import (
    BATCHES,
    WARMUP,
    ClockedRegression,
    FakeClock,
    RecordingBudget,
    SlowRegression,
    data,
    fake_clock,
    never_rises,
    noisy_pace,
    trainer,
)


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return fake_clock(monkeypatch)


def fit(max_time, max_epochs=1000, model: L.LightningModule | None = None, reserve_factor: float = 1.25):
    model, budget = model or SlowRegression(), RecordingBudget(reserve_factor=reserve_factor)
    run = trainer(max_time, max_epochs, [budget])
    run.fit(model, data(), data(4) if isinstance(model, ClockedRegression) else None)
    return run, model, budget


def schedule_at_its_end(run: L.Trainer) -> bool:
    """The schedule has reached the end of its cosine."""
    scheduler = run.lr_scheduler_configs[0].scheduler
    return scheduler.lr_lambdas[0].progress(scheduler.last_epoch) == 1.0


def steps_of(epochs: int) -> int:
    return epochs * BATCHES


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_noisy_step_times_never_raise_the_rate_and_the_budget_is_used_to_its_end(clock, seed):
    """Epochs of about 30 s whose speed varies by up to 40 % in a 600 s budget: the rate never rises, and training
    stops within a step and a validation of the budget, with a last validation of the final model."""
    model = ClockedRegression(clock, *noisy_pace(seed))
    run, model, budget = fit({"seconds": 600}, model=model)
    assert never_rises(model.rates[WARMUP:]), model.rates
    assert schedule_at_its_end(run) and model.rates[-1] < 0.1 * 0.2
    assert budget.stopped_at is not None  # stopped by the budget's plan, not cut off by the timer
    assert budget.validations[-1][0] == len(model.rates)  # the last validation saw the final weights
    assert 600 - 2 * (8.4 + 2.0) <= clock.now <= 600  # at most about a step and a validation unused


def test_training_stops_in_the_middle_of_an_epoch_to_keep_the_last_validation(clock):
    """Steps of 10 s, epochs of 50 s, validations of 12 s, a budget of 230 s: four whole epochs (248 s with their
    validations) do not fit; the stop comes inside the fourth, and its validation ends inside the budget."""
    model = ClockedRegression(clock, lambda epoch, batch, rank: 10.0, lambda epoch: 12.0)
    run, model, budget = fit({"seconds": 230}, model=model)
    assert len(model.rates) % BATCHES != 0  # mid-epoch
    assert budget.validations[-1] == (len(model.rates), 3) and clock.now <= 230  # the final weights, validated
    assert clock.now >= 230 - 10.0 - 1.25 * 12.0 - 1e-6  # nothing left but a step and the reserve


def test_the_progress_is_the_elapsed_share_of_the_budget(clock):
    """Steps of 3 s and no validation time in a 300 s budget (the reserve: 5 % before any validation)."""
    model = ClockedRegression(clock, lambda epoch, batch, rank: 3.0, lambda epoch: 0.0)
    run, model, budget = fit({"seconds": 300}, model=model)
    factor = run.lr_scheduler_configs[0].scheduler.lr_lambdas[0]
    share_at_warmup_end, _ = factor.clock_anchor
    # the clock takes over after the step before the last warm-up step (its rate was set by then)
    assert share_at_warmup_end == pytest.approx((WARMUP - 1) * 3.0 / (300 * 0.95), rel=0.05)
    middle = len(model.rates) // 2
    expected = 0.5 * (1 + math.cos(math.pi * ((middle * 3.0 / 300) - share_at_warmup_end)
                                   / (1 - share_at_warmup_end)))
    assert model.rates[middle] / 0.1 == pytest.approx(expected, abs=0.08)


def test_a_real_time_budget_is_used_and_ends_annealed():
    run, model, budget = fit({"seconds": 3})
    # about 3 s / 0.06 s = 50 steps; the sleeps are lower bounds of the real step time
    assert 10 <= len(model.rates) <= 50 and budget.stopped_at is not None
    assert model.rates[-1] < 0.1 * 0.2  # the cosine reaches its end at the last step, not cut off near the peak
    assert max(model.rates) == pytest.approx(0.1, rel=0.02)


def reference_warmup_cosine(step: int, total: int, warmup: int, final: float) -> float:
    """The warm-up + cosine as it was before the clock could drive it (a fixed schedule must stay bit for bit)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize(
    ("total", "warmup", "final"), [(2000, 200, 0.05), (12 * 437, 200, 0.05), (97, 3, 0.0), (5, 10, 0.1)],
)
def test_a_fixed_schedule_is_bit_for_bit_the_same(total, warmup, final):
    factor = WarmupCosine(total, warmup, final)
    assert all(factor(step) == reference_warmup_cosine(step, total, warmup, final) for step in range(total + 5))


def test_without_max_time_nothing_changes():
    run, model, budget = fit(None, max_epochs=2)
    assert budget.stopped_at is None and run.current_epoch == 2
    steps = steps_of(2)
    assert model.rates == [0.1 * reference_warmup_cosine(step, steps, WARMUP, 0.0) for step in range(steps)]


def test_max_epochs_stays_an_upper_bound_and_ends_the_schedule(clock):
    """A budget far larger than 3 epochs need: max_epochs ends the run, and the schedule ends with it."""
    model = ClockedRegression(clock, lambda epoch, batch, rank: 1.0, lambda epoch: 0.0)
    run, model, budget = fit({"seconds": 3000}, max_epochs=3, model=model)
    assert run.current_epoch == 3 and budget.stopped_at is None and len(model.rates) == steps_of(3)
    assert never_rises(model.rates[WARMUP:]) and schedule_at_its_end(run)


def test_the_clock_takes_over_from_the_rate_reached_and_never_goes_back():
    factor = WarmupCosine(100, warmup_steps=10, final_ratio=0.05)
    before = factor(10)
    factor.follow_clock(0.2, 9)  # after step 9 the warm-up is over: the clock takes over at share 0.2
    assert factor(10) == before  # no jump
    rates = []
    for step, share in enumerate([0.3, 0.5, 0.4, 0.7, 0.65, 1.0], start=10):  # a clock read late, then early
        factor.follow_clock(share, step)
        rates.append(factor(step + 1))
    assert never_rises(rates) and rates[-1] == pytest.approx(0.05) and factor.progress(0) == 1.0


def test_the_warm_up_is_counted_in_steps_whatever_the_clock_says():
    factor = WarmupCosine(100, warmup_steps=10, final_ratio=0.0)
    for step in range(8):
        factor.follow_clock(0.5, step)
    assert factor.clock_anchor is None and factor(5) == pytest.approx(0.6)


def test_the_clock_travels_in_the_scheduler_state():
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    scheduler = warmup_cosine(optimizer, total_steps=1000, warmup_steps=0, final_ratio=0.0)
    for step in range(100):
        optimizer.step()
        assert follow_clock(scheduler, 0.005 * (step + 1))
        scheduler.step()
    restored = warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), total_steps=1000)
    restored.load_state_dict(scheduler.state_dict())
    factor = restored.lr_lambdas[0]
    assert factor.clock_progress == scheduler.lr_lambdas[0].clock_progress == pytest.approx(0.5, abs=0.01)
    assert restored.get_last_lr() == scheduler.get_last_lr()
    assert not follow_clock(torch.optim.lr_scheduler.StepLR(optimizer, 5), 0.5)


@pytest.mark.parametrize("options, message", [({"reserve_factor": 0.5}, "reserve_factor must be 1 or more"),
                                              ({"first_reserve": 0.7}, "first_reserve must be in")])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        FollowTheClock(**options)
