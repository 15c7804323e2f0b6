"""The autotuner's policy on synthetic traces: windows built by hand, and windows of a small model
of a pipeline (workers sharing CPUs, a training loop with its own step) that the policy drives.

What is proven: it grows to what the loop needs when loading is the bottleneck and CPUs are idle,
and no further; shrinks when workers idle for a while; holds on a saturated CPU, under a cgroup
quota of 1.5 CPUs and without memory room; takes back a change that did not pay and keeps the
learnt bound for a while; follows a dataset that slows down halfway; sets the prefetch depth
from the spread of batch times within the memory room; and does not oscillate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest

from dataloader._tune import policy as policy_module
from dataloader._tune.policy import Limits, Policy, Settings, Window
from dataloader._tune.tuner import Autotuner
from tests.test_memory import v2_tree

GiB = 2**30
MiB = 2**20


def _window(settings: Settings, **fields) -> Window:
    """One window of 0.5 s; the fields not given describe a pipeline with room to spare."""
    values = dict(
        seconds=0.5, handed_out=50, wait=0.0, made=50, busy=0.5, make_cv=0.1, cpu_free=4.0,
        memory_room=16 * GiB, worker_memory=100 * MiB, batch_bytes=1 * MiB, settings=settings,
    )
    values.update(fields)
    return Window(**values)


def _limits(**fields) -> Limits:
    values = dict(cpus=8.0, max_workers=16, memory_margin=2 * GiB)
    values.update(fields)
    return Limits(**values)


@dataclass
class Model:
    """A pipeline in steady state: ``workers`` share ``cpus`` (less what the main process
    uses); each batch takes ``make`` CPU-seconds; the loop spends ``step`` s on each."""

    make: float
    step: float
    cpus: float
    main: float = 0.3  # CPUs the main process uses receiving batches
    room: int = 16 * GiB
    worker_memory: int = 100 * MiB
    cv: float = 0.1

    def window(self, settings: Settings, seconds: float = 0.5) -> Window:
        workers = settings.workers
        speed = min(1.0, max(0.05, self.cpus - self.main) / workers)  # share of a CPU each worker gets
        supply = workers * speed / self.make
        rate = min(supply, 1 / self.step) if self.step > 0 else supply
        handed_out = rate * seconds
        wait = max(0.0, seconds - handed_out * self.step)
        busy = handed_out * self.make / speed  # wall seconds the workers spent making
        used = self.main + handed_out * self.make / seconds + (self.step * rate if self.step else 0)
        return Window(
            seconds=seconds, handed_out=round(handed_out), wait=wait, made=round(handed_out), busy=busy,
            make_cv=self.cv, cpu_free=max(0.0, self.cpus - used), memory_room=self.room,
            worker_memory=self.worker_memory, batch_bytes=MiB, settings=settings,
        )


def _run(policy: Policy, model: Model, windows: int) -> list[int]:
    """Drive ``policy`` with ``model``'s windows; the worker count after each."""
    counts = []
    for _ in range(windows):
        policy.decide(model.window(policy.settings))
        counts.append(policy.settings.workers)
    return counts


def test_loader_bound_with_idle_cpus_grows_to_what_the_loop_needs_and_stays():
    # 40 ms of CPU a batch, a 5 ms step: 8 workers (plus the margin) keep the loop fed.
    model = Model(make=0.040, step=0.005, cpus=16)
    policy = Policy(_limits(cpus=16, max_workers=32), Settings(1, 2))
    counts = _run(policy, model, 40)
    settled = counts[5]
    assert 8 <= settled <= 10, counts
    assert counts[5:] == [settled] * 35, f"the count moved after settling: {counts}"
    assert model.window(policy.settings).wait_fraction < policy_module.WAIT_HIGH


def test_consumer_bound_shrinks_after_patience_to_a_busy_pool():
    model = Model(make=0.010, step=0.050, cpus=16)  # one worker makes 5x what the loop takes
    policy = Policy(_limits(cpus=16), Settings(6, 2))
    counts = _run(policy, model, 12)
    assert counts[0] == 6, "one idle window is not enough to shrink"
    assert counts[-1] == 1, counts
    assert model.window(policy.settings).wait_fraction < policy_module.WAIT_HIGH


def test_a_saturated_cpu_holds_the_pool_however_long_the_loop_waits():
    policy = Policy(_limits(cpus=2), Settings(2, 2))
    for _ in range(10):
        assert policy.decide(_window(policy.settings, wait=0.45, busy=1.0, cpu_free=0.2)) is None
    assert policy.settings.workers == 2


def test_a_cgroup_quota_of_one_and_a_half_cpus_bounds_the_pool(tmp_path):
    proc, _ = v2_tree(tmp_path, "/job", cpu__max="150000 100000")
    tuner = Autotuner(workers=True, depth=True, proc_root=proc)
    assert tuner.limits.cpus == 1.5
    assert tuner.limits.max_workers == 4
    assert "1.5 usable CPUs (cgroup quota)" in tuner.estimate()
    # The quota's worth of CPU is in use (idle CPUs the quota forbids are not free): no growth.
    model = Model(make=0.040, step=0.0, cpus=1.5)
    counts = _run(tuner.policy, model, 20)
    assert max(counts) <= 2, counts


def test_no_memory_room_no_growth_and_below_the_margin_a_worker_goes():
    limits = _limits(memory_margin=2 * GiB)
    policy = Policy(limits, Settings(3, 2))
    # Loader-bound with idle CPUs, but one more worker would eat into the margin.
    tight = _window(policy.settings, wait=0.4, busy=1.5, memory_room=2 * GiB + 50 * MiB)
    assert policy.decide(tight) is None
    decision = policy.decide(_window(policy.settings, wait=0.4, busy=1.5, memory_room=1 * GiB))
    assert decision is not None and decision.settings.workers == 2
    assert "memory room 1.0 GiB is below the 2.0 GiB kept free" in decision.reason
    # It grows back only once a worker and its batches fit above the margin: a band, not a flip.
    assert policy.decide(_window(policy.settings, wait=0.4, busy=1.0, memory_room=2 * GiB + 50 * MiB)) is None
    grown = policy.decide(_window(policy.settings, wait=0.4, busy=1.0, memory_room=8 * GiB))
    assert grown is not None and grown.settings.workers > 2


def test_growth_that_does_not_pay_is_taken_back_and_held_until_the_regime_changes():
    # 45 ms a batch and a 10 ms step say 5 workers, but more do not help: the main process
    # reads the stream (a fixed 40 batches/s).
    policy = Policy(_limits(), Settings(2, 2))
    stuck = dict(handed_out=20, made=20, wait=0.3, busy=0.9)
    decision = policy.decide(_window(policy.settings, **stuck))
    assert decision is not None and decision.settings.workers == 5
    back = policy.decide(_window(policy.settings, **{**stuck, "busy": 0.9 * 5 / 2}))
    assert back is not None and back.settings.workers == 2
    assert "5 -> 2 workers" in back.reason and "not 2% more" in back.reason
    for _ in range(30):
        assert policy.decide(_window(policy.settings, **stuck)) is None
    # The batches take twice as long now: one window may be noise, two are another regime, and
    # the ceiling is forgotten.
    slower = dict(stuck, busy=1.0, made=11)
    assert policy.decide(_window(policy.settings, **slower)) is None
    grown = policy.decide(_window(policy.settings, **slower))
    assert grown is not None and grown.settings.workers > 2


def test_a_shrink_that_starves_the_loop_is_taken_back():
    policy = Policy(_limits(), Settings(4, 2))
    idle = _window(policy.settings, wait=0.0, busy=0.4)
    assert policy.decide(idle) is None
    shrink = policy.decide(idle)
    assert shrink is not None and shrink.settings.workers == 1
    back = policy.decide(_window(policy.settings, handed_out=20, wait=0.3, busy=0.45))
    assert back is not None and back.settings.workers == 4
    assert "4 is the fewest for now" in back.reason


def test_a_dataset_that_slows_down_halfway_gets_more_workers():
    model = Model(make=0.010, step=0.005, cpus=16)
    policy = Policy(_limits(cpus=16, max_workers=32), Settings(1, 2))
    before = _run(policy, model, 20)[-1]
    assert before in (2, 3)
    slow = replace(model, make=0.040)
    after = _run(policy, slow, 20)
    assert 8 <= after[-1] <= 10, after
    assert after[-10:] == [after[-1]] * 10


def test_noise_around_the_thresholds_changes_nothing():
    policy = Policy(_limits(), Settings(3, 2))
    for wait in [0.01, 0.03, 0.015, 0.04, 0.0, 0.045] * 5:
        assert policy.decide(_window(policy.settings, wait=wait * 0.5, busy=1.2)) is None
    assert policy.settings == Settings(3, 2)


def test_prefetch_depth_follows_the_spread_of_batch_times_within_memory():
    policy = Policy(_limits(tune_workers=False), Settings(2, 2))
    steady = _window(policy.settings, make_cv=1.5)
    assert policy.decide(steady) is None, "one window is not enough"
    decision = policy.decide(steady)
    assert decision is not None and decision.settings.depth == 5
    assert decision.reason.startswith("prefetch 2 -> 5: batch times vary by 150%")
    # Big batches and little room: the depth is what half the room over the margin holds.
    big = _window(policy.settings, make_cv=1.5, batch_bytes=512 * MiB, memory_room=2 * GiB + 2 * GiB)
    policy.decide(big)
    decision = policy.decide(big)
    assert decision is not None and decision.settings.depth == 1


def test_fixed_settings_are_left_alone():
    policy = Policy(_limits(tune_workers=False, tune_depth=False), Settings(3, 4))
    for _ in range(5):
        assert policy.decide(_window(policy.settings, wait=0.4, make_cv=2.0)) is None
        assert policy.decide(_window(policy.settings, wait=0.0, busy=0.1)) is None


@pytest.mark.parametrize("cpus", [2, 16])
def test_the_model_settles_within_four_windows(cpus):
    model = Model(make=0.030, step=0.0, cpus=cpus)  # the benchmark's case: a loop that only loads
    policy = Policy(_limits(cpus=cpus, max_workers=2 * cpus), Settings(1, 2))
    counts = _run(policy, model, 30)
    assert counts[4:] == [counts[4]] * 26, counts
    assert counts[4] >= math.floor(cpus - model.main) - 1
