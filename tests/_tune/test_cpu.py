"""Tests for dataloader._tune.cpu and memory.cgroup_cpu_seconds: fake cgroups and counters."""

from __future__ import annotations

import os
import time
from collections import namedtuple
from pathlib import Path
from typing import Iterable

import pytest

from dataloader._tune.cpu import CpuMeter, usable_cpus
from dataloader.memory import cgroup_cpu_seconds
from tests.test_memory import fake_proc, v1_tree, v2_tree, write

Times = namedtuple("Times", "idle iowait")  # psutil's Linux scputimes, the fields read here
BareTimes = namedtuple("BareTimes", "idle")  # other systems have no iowait


@pytest.fixture
def two_cpus(monkeypatch):
    """Make this process's affinity set {0, 1}, whatever the machine has."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


def feed(*values: object) -> object:
    """A callable returning ``values`` one per call, for ``clock`` and ``cpu_times``."""
    it = iter(values)
    return lambda *args, **kwargs: next(it)


def idle(*seconds: float) -> list[Times]:
    return [Times(s, 0.0) for s in seconds]


def meter(proc: str, clock: Iterable[float], times: Iterable[object], cpus=(0, 1)) -> CpuMeter:
    return CpuMeter(proc, clock=feed(*clock), cpu_times=feed(*times), affinity=lambda: set(cpus))


def no_quota(tmp_path: Path) -> str:
    return v2_tree(tmp_path, cpu__max="max 100000")[0]


# ---------------------------------------------------------------- usable_cpus


def test_usable_v2_quota_is_not_rounded(tmp_path, two_cpus):
    proc, _ = v2_tree(tmp_path, cpu__max="150000 100000")
    assert usable_cpus(proc) == 1.5


def test_usable_v1_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    proc, _ = v1_tree(
        tmp_path, "3:cpu,cpuacct:/job", "rw,cpu,cpuacct",
        cpu__cfs_quota_us="250000\n", cpu__cfs_period_us="100000\n",
    )
    assert usable_cpus(proc) == 2.5


def test_usable_quota_above_the_affinity_gives_the_affinity(tmp_path, two_cpus):
    proc, _ = v2_tree(tmp_path, cpu__max="800000 100000")
    assert usable_cpus(proc) == 2.0


def test_usable_without_a_quota_is_the_affinity_size(tmp_path, monkeypatch):
    proc = no_quota(tmp_path)
    assert usable_cpus(proc) == float(len(os.sched_getaffinity(0)))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    got = usable_cpus(proc)
    assert got == 3.0 and isinstance(got, float)


def test_usable_tiny_quota_is_floored(tmp_path, two_cpus):
    proc, _ = v2_tree(tmp_path, cpu__max="1000 100000")  # 0.01 CPU
    assert usable_cpus(proc) == 0.1
    proc2, _ = v2_tree(tmp_path / "b", cpu__max="30000 100000")
    assert usable_cpus(proc2) == pytest.approx(0.3)


def test_usable_falls_back_to_cpu_count(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert usable_cpus(no_quota(tmp_path)) == 6.0


# ---------------------------------------------------------------- cgroup_cpu_seconds


def test_cgroup_cpu_seconds_v2(tmp_path):
    stat = "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
    proc, _ = v2_tree(tmp_path, cpu__stat=stat)
    assert cgroup_cpu_seconds(proc) == pytest.approx(2.5)


def test_cgroup_cpu_seconds_v1_co_mounted(tmp_path):
    proc, _ = v1_tree(
        tmp_path, "3:cpu,cpuacct:/job", "rw,cpu,cpuacct", cpuacct__usage="1500000000\n"
    )
    assert cgroup_cpu_seconds(proc) == pytest.approx(1.5)


def test_cgroup_cpu_seconds_v1_separate_mounts_read_cpuacct(tmp_path):
    cpu, acct = tmp_path / "cpu", tmp_path / "cpuacct"
    write(cpu / "job", cpuacct__usage="1")  # a decoy: the cpu hierarchy is not cpuacct's
    write(acct / "job", cpuacct__usage="4000000000")
    proc = fake_proc(
        tmp_path, "3:cpuacct:/job\n2:cpu:/job\n0::/\n",
        [("/", str(cpu), "cgroup", "rw,cpu"), ("/", str(acct), "cgroup", "rw,cpuacct")],
    )
    assert cgroup_cpu_seconds(proc) == pytest.approx(4.0)


def test_cgroup_cpu_seconds_hybrid_without_v1_cpuacct_reads_v2(tmp_path):
    mem, unified = tmp_path / "mem", tmp_path / "unified"
    write(mem / "x", cpuacct__usage="9")
    write(unified, cpu__stat="usage_usec 750000\n")
    proc = fake_proc(
        tmp_path, "4:memory:/x\n0::/\n",
        [("/", str(mem), "cgroup", "rw,memory"), ("/", str(unified), "cgroup2", "rw")],
    )
    assert cgroup_cpu_seconds(proc) == pytest.approx(0.75)


def test_cgroup_cpu_seconds_missing_or_odd_files(tmp_path):
    assert cgroup_cpu_seconds(v2_tree(tmp_path / "a")[0]) is None
    assert cgroup_cpu_seconds(v2_tree(tmp_path / "b", cpu__stat="user_usec 5\n")[0]) is None
    assert cgroup_cpu_seconds(v2_tree(tmp_path / "c", cpu__stat="usage_usec abc\n")[0]) is None
    v1_empty, _ = v1_tree(tmp_path / "d", "3:cpu,cpuacct:/j", "rw,cpu,cpuacct")
    assert cgroup_cpu_seconds(v1_empty) is None
    assert cgroup_cpu_seconds(
        v1_tree(tmp_path / "e", "3:cpu,cpuacct:/j", "rw,cpu,cpuacct", cpuacct__usage="-1")[0]
    ) is None
    assert cgroup_cpu_seconds(fake_proc(tmp_path / "f", None, [])) is None
    assert cgroup_cpu_seconds(str(tmp_path / "nowhere")) is None


# ---------------------------------------------------------------- CpuMeter


def test_first_sample_primes_and_returns_none(tmp_path):
    m = meter(no_quota(tmp_path), [0.0, 1.0], [idle(0, 0), idle(1, 0)])
    assert m.sample() is None
    assert m.sample() == pytest.approx(1.0)


def test_one_idle_cpu_of_two_gives_one_free(tmp_path):
    # CPU 2 is idle too, but outside the affinity set: it must not count.
    m = meter(no_quota(tmp_path), [10.0, 11.0], [idle(5, 7, 0), idle(6, 7, 1)])
    m.sample()
    assert m.sample() == pytest.approx(1.0)


def test_idle_is_divided_by_wall_time_and_counts_iowait(tmp_path):
    before = [Times(0.0, 0.0), Times(0.0, 0.0)]
    after = [Times(1.0, 0.5), Times(1.5, 0.0)]  # 3 idle CPU-seconds over 2 s
    m = meter(no_quota(tmp_path), [0.0, 2.0], [before, after])
    m.sample()
    assert m.sample() == pytest.approx(1.5)


def test_times_without_iowait(tmp_path):
    m = meter(no_quota(tmp_path), [0.0, 0.5], [[BareTimes(1.0)], [BareTimes(1.25)]], cpus=[0])
    m.sample()
    assert m.sample() == pytest.approx(0.5)


def test_free_is_clamped_to_zero_and_the_cpu_count(tmp_path):
    m = meter(no_quota(tmp_path), [0, 1, 2], [idle(0, 0), idle(1.2, 1.1), idle(1.1, 1.1)])
    m.sample()
    assert m.sample() == 2.0  # tick jitter above 2 CPUs' worth reads as all free
    assert m.sample() == 0.0  # and a counter going backwards as none


def test_quota_caps_free_time_by_the_groups_usage(tmp_path, two_cpus):
    proc, mount = v2_tree(tmp_path, cpu__max="150000 100000", cpu__stat="usage_usec 1000000\n")
    m = meter(proc, [0.0, 1.0], [idle(0, 0), idle(1, 1)])
    assert m.usable == 1.5
    assert m.sample() is None
    write(mount / "app", cpu__stat="usage_usec 2200000\n")  # 1.2 CPU-seconds in 1 s
    assert m.sample() == pytest.approx(0.3)


def test_group_over_its_quota_has_nothing_free(tmp_path):
    proc, mount = v2_tree(tmp_path, cpu__max="150000 100000", cpu__stat="usage_usec 0\n")
    m = meter(proc, [0.0, 1.0], [idle(0, 0), idle(1, 1)])
    m.sample()
    write(mount / "app", cpu__stat="usage_usec 1600000\n")
    assert m.sample() == 0.0


def test_v1_quota_caps_free_time(tmp_path):
    proc, mount = v1_tree(
        tmp_path, "3:cpu,cpuacct:/job", "rw,cpu,cpuacct", cpu__cfs_quota_us="100000",
        cpu__cfs_period_us="100000", cpuacct__usage="0",
    )
    m = meter(proc, [0.0, 2.0], [idle(0, 0), idle(2, 2)])
    m.sample()
    write(mount / "job", cpuacct__usage="1000000000")  # 1 CPU-second over 2 s: 0.5 CPU
    assert m.sample() == pytest.approx(0.5)


def test_unreadable_usage_leaves_the_quota_as_the_cap(tmp_path):
    proc, _ = v2_tree(tmp_path, cpu__max="150000 100000")  # no cpu.stat
    m = meter(proc, [0.0, 1.0], [idle(0, 0), idle(1, 1)])
    m.sample()
    assert m.sample() == pytest.approx(1.5)


def test_no_elapsed_time_keeps_the_previous_reading(tmp_path):
    m = meter(no_quota(tmp_path), [0.0, 0.0, 2.0], [idle(0, 0), idle(0.5, 0), idle(1, 1)])
    assert m.sample() is None
    assert m.sample() is None  # same clock value: nothing to divide by
    assert m.sample() == pytest.approx(1.0)  # measured from the first reading, over 2 s


def test_real_sample_on_this_machine():
    m = CpuMeter()
    assert 0.1 <= m.usable <= (os.cpu_count() or 1)
    assert m.sample() is None
    end = time.monotonic() + 0.1
    while time.monotonic() < end:  # busy, so that the interval is long enough to tick
        pass
    free = m.sample()
    assert isinstance(free, float)
    assert 0.0 <= free <= (os.cpu_count() or 1)
