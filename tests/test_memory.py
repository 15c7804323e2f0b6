"""Tests for dataloader.memory: fake cgroup trees under tmp_path, real /dev/shm and processes."""

from __future__ import annotations

import logging
import mmap
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import psutil
import pytest

from dataloader import memory
from dataloader.errors import ArgumentValueError, SharedMemoryError
from dataloader.memory import (
    CgroupMemory,
    MemoryRoom,
    available_cpus,
    cgroup_memory,
    check_shm,
    check_worker_memory,
    cpu_quota,
    describe_oom,
    describe_shm,
    memory_room,
    process_tree_memory,
    shm_room,
)

MIB = 1024 * 1024
GIB = 1024 * MIB
V1_UNLIMITED = 9223372036854771712


# ---------------------------------------------------------------- fake trees


def fake_proc(tmp_path: Path, cgroup: str | None, mounts: list[tuple[str, str, str, str]]) -> str:
    """Write proc/self/{cgroup,mountinfo}; each mount is (root, point, fstype, super_options)."""
    self_dir = tmp_path / "proc" / "self"
    self_dir.mkdir(parents=True)
    if cgroup is not None:
        (self_dir / "cgroup").write_text(cgroup)
    lines = [
        f"{30 + i} 23 0:{26 + i} {root} {point} rw,nosuid shared:{i} - {fstype} {fstype} {opts}"
        for i, (root, point, fstype, opts) in enumerate(mounts)
    ]
    lines.insert(0, "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw")
    (self_dir / "mountinfo").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "proc")


def write(directory: Path, **files: str) -> Path:
    """Create ``directory`` and write files named by keyword (``__`` stands for a dot)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name.replace("__", ".")).write_text(text)
    return directory


def v2_tree(tmp_path: Path, group: str = "/app", **files: str) -> tuple[str, Path]:
    mount = tmp_path / "cg2"
    write(mount / group.lstrip("/"), **files)
    proc = fake_proc(tmp_path, f"0::{group}\n", [("/", str(mount), "cgroup2", "rw,nsdelegate")])
    return proc, mount


def v1_tree(tmp_path: Path, line: str, opts: str, **files: str) -> tuple[str, Path]:
    mount = tmp_path / "cg1"
    group = line.split(":", 2)[2]
    write(mount / group.lstrip("/"), **files)
    proc = fake_proc(tmp_path, line + "\n1:name=systemd:/\n", [("/", str(mount), "cgroup", opts)])
    return proc, mount


# ---------------------------------------------------------------- cgroup v2


def test_v2_limit_and_usage(tmp_path):
    proc, mount = v2_tree(tmp_path, memory__max=str(2 * GIB), memory__current=str(GIB))
    got = cgroup_memory(proc_root=proc)
    assert got == CgroupMemory(2, 2 * GIB, GIB, str(mount / "app"), None)


def test_v2_max_means_unlimited(tmp_path):
    proc, _ = v2_tree(tmp_path, memory__max="max\n", memory__current="12345\n")
    got = cgroup_memory(proc_root=proc)
    assert (got.version, got.limit, got.usage) == (2, None, 12345)


def test_v2_limit_on_a_parent_only(tmp_path):
    proc, mount = v2_tree(tmp_path, group="/kube/pod/ctr", memory__max="max", memory__current="100")
    write(mount / "kube" / "pod", memory__max=str(3 * GIB))
    write(mount / "kube", memory__max=str(5 * GIB))
    got = cgroup_memory(proc_root=proc)
    assert got.limit == 3 * GIB
    assert got.path == str(mount / "kube" / "pod" / "ctr")


def test_v2_smaller_child_limit_wins(tmp_path):
    proc, mount = v2_tree(tmp_path, group="/a/b", memory__max=str(GIB))
    write(mount / "a", memory__max=str(4 * GIB))
    assert cgroup_memory(proc_root=proc).limit == GIB


def test_v2_working_set_drops_inactive_cache(tmp_path):
    stat = "anon 100\ninactive_file 300\nactive_file 5\n"
    proc, _ = v2_tree(tmp_path, memory__max="1000", memory__current="700", memory__stat=stat)
    got = cgroup_memory(proc_root=proc)
    assert got.inactive_file == 300
    assert got.working_set == 400


def test_container_mount_root_is_stripped(tmp_path):
    # Without a cgroup namespace the container sees the host's path, and the mount's root is it.
    mount = tmp_path / "cg2"
    write(mount, memory__max=str(GIB), memory__current="42")
    proc = fake_proc(
        tmp_path, "0::/docker/abc123\n", [("/docker/abc123", str(mount), "cgroup2", "rw")]
    )
    got = cgroup_memory(proc_root=proc)
    assert (got.path, got.limit, got.usage) == (str(mount), GIB, 42)


def test_container_mount_root_strips_to_a_child(tmp_path):
    mount = tmp_path / "cg2"
    write(mount / "sub", memory__max="777", memory__current="1")
    mounts = [("/docker/abc", str(mount), "cgroup2", "rw")]
    proc = fake_proc(tmp_path, "0::/docker/abc/sub\n", mounts)
    assert cgroup_memory(proc_root=proc).path == str(mount / "sub")


def test_missing_group_dir_falls_back_to_mount_point(tmp_path):
    mount = tmp_path / "cg2"
    write(mount, memory__max="5000", memory__current="10")
    proc = fake_proc(tmp_path, "0::/not/visible/here\n", [("/", str(mount), "cgroup2", "rw")])
    got = cgroup_memory(proc_root=proc)
    assert (got.path, got.limit) == (str(mount), 5000)


def test_dotdot_group_path_stays_inside_the_mount(tmp_path):
    mount = tmp_path / "cg2"
    write(mount, memory__max="5000")
    write(tmp_path, memory__max="1")  # a file outside the mount must never be read
    proc = fake_proc(tmp_path, "0::/../..\n", [("/", str(mount), "cgroup2", "rw")])
    got = cgroup_memory(proc_root=proc)
    assert (got.path, got.limit) == (str(mount), 5000)


def test_escaped_mount_point_with_a_space(tmp_path):
    mount = tmp_path / "my cg"
    write(mount / "g", memory__max="2048")
    escaped = str(mount).replace(" ", "\\040")  # how the kernel writes a space in mountinfo
    proc = fake_proc(tmp_path, "0::/g\n", [("/", escaped, "cgroup2", "rw")])
    assert cgroup_memory(proc_root=proc).limit == 2048


# ---------------------------------------------------------------- cgroup v1


def test_v1_huge_value_means_unlimited(tmp_path):
    proc, _ = v1_tree(
        tmp_path, "4:memory:/job", "rw,memory",
        memory__limit_in_bytes=str(V1_UNLIMITED), memory__usage_in_bytes="999",
    )
    got = cgroup_memory(proc_root=proc)
    assert (got.version, got.limit, got.usage) == (1, None, 999)


def test_v1_real_limit(tmp_path):
    proc, mount = v1_tree(
        tmp_path, "4:memory:/job", "rw,memory",
        memory__limit_in_bytes=str(512 * MIB), memory__usage_in_bytes=str(100 * MIB),
        memory__stat="cache 1\ntotal_inactive_file 4096\n",
    )
    got = cgroup_memory(proc_root=proc)
    assert got == CgroupMemory(1, 512 * MIB, 100 * MIB, str(mount / "job"), 4096)


def test_v1_combined_controller_line(tmp_path):
    proc, mount = v1_tree(
        tmp_path, "4:cpu,memory:/x", "rw,cpu,memory",
        memory__limit_in_bytes="1000", memory__usage_in_bytes="10",
    )
    got = cgroup_memory(proc_root=proc)
    assert (got.version, got.limit, got.path) == (1, 1000, str(mount / "x"))


def test_v1_ignores_a_cgroup_mount_without_memory(tmp_path):
    cpu_mount, mem_mount = tmp_path / "cpu", tmp_path / "mem"
    write(cpu_mount / "x", memory__limit_in_bytes="1")
    write(mem_mount / "x", memory__limit_in_bytes="2000")
    proc = fake_proc(
        tmp_path, "5:cpu:/x\n4:memory:/x\n",
        [("/", str(cpu_mount), "cgroup", "rw,cpu"), ("/", str(mem_mount), "cgroup", "rw,memory")],
    )
    assert cgroup_memory(proc_root=proc).limit == 2000


def test_hybrid_host_prefers_the_v1_memory_hierarchy(tmp_path):
    v1, v2 = tmp_path / "mem", tmp_path / "unified"
    write(v1 / "x", memory__limit_in_bytes="3000")
    write(v2)
    proc = fake_proc(
        tmp_path, "4:memory:/x\n0::/\n",
        [("/", str(v1), "cgroup", "rw,memory"), ("/", str(v2), "cgroup2", "rw")],
    )
    got = cgroup_memory(proc_root=proc)
    assert (got.version, got.limit) == (1, 3000)


# ---------------------------------------------------------------- missing and odd files


def test_missing_proc_cgroup_gives_version_none(tmp_path):
    proc = fake_proc(tmp_path, None, [])
    assert cgroup_memory(proc_root=proc) == CgroupMemory(None, None, None, None)
    assert cpu_quota(proc_root=proc) is None


def test_missing_proc_root_entirely(tmp_path):
    assert cgroup_memory(proc_root=str(tmp_path / "nope")).version is None


def test_missing_mount_gives_version_none(tmp_path):
    proc = fake_proc(tmp_path, "0::/app\n", [])
    assert cgroup_memory(proc_root=proc).version is None


def test_missing_files_give_none(tmp_path):
    proc, _ = v2_tree(tmp_path)
    got = cgroup_memory(proc_root=proc)
    assert (got.version, got.limit, got.usage, got.working_set) == (2, None, None, None)


@pytest.mark.parametrize("garbage", ["abc", "", "\n", "-5", "12 34", "\xff"])
def test_garbage_contents_give_none(tmp_path, garbage):
    proc, _ = v2_tree(tmp_path, memory__max=garbage, memory__current=garbage, memory__stat=garbage)
    got = cgroup_memory(proc_root=proc)
    assert (got.version, got.limit, got.usage) == (2, None, None)


def test_garbage_proc_files_do_not_crash(tmp_path):
    self_dir = tmp_path / "proc" / "self"
    self_dir.mkdir(parents=True)
    (self_dir / "cgroup").write_text("garbage\n::\n0\n")
    (self_dir / "mountinfo").write_text("short line\n1 2 3 4 5 6 - \n\n")
    assert cgroup_memory(proc_root=str(tmp_path / "proc")).limit is None
    assert cpu_quota(proc_root=str(tmp_path / "proc")) is None


def test_binary_file_does_not_crash(tmp_path):
    proc, mount = v2_tree(tmp_path)
    (mount / "app" / "memory.max").write_bytes(b"\xff\xfe\x00")
    assert cgroup_memory(proc_root=proc).limit is None


# ---------------------------------------------------------------- cpu quota


@pytest.mark.parametrize(
    "text, expected", [("max 100000", None), ("200000 100000", 2.0), ("150000 100000\n", 1.5),
                       ("abc", None), ("", None), ("0 100000", None)],
)
def test_v2_cpu_max(tmp_path, text, expected):
    proc, _ = v2_tree(tmp_path, cpu__max=text)
    assert cpu_quota(proc_root=proc) == expected


def test_v2_cpu_max_on_a_parent(tmp_path):
    proc, mount = v2_tree(tmp_path, group="/a/b", cpu__max="max 100000")
    write(mount / "a", cpu__max="50000 100000")
    assert cpu_quota(proc_root=proc) == 0.5


@pytest.mark.parametrize(
    "quota, period, expected", [("-1", "100000", None), ("300000", "100000", 3.0),
                                ("50000", "100000", 0.5), ("x", "100000", None)],
)
def test_v1_cfs_quota(tmp_path, quota, period, expected):
    proc, _ = v1_tree(
        tmp_path, "3:cpu,cpuacct:/job", "rw,cpu,cpuacct",
        cpu__cfs_quota_us=quota + "\n", cpu__cfs_period_us=period + "\n",
    )
    assert cpu_quota(proc_root=proc) == expected


def test_available_cpus_is_capped_by_the_quota(tmp_path):
    proc, _ = v2_tree(tmp_path, cpu__max="50000 100000")
    assert available_cpus(proc_root=proc) == 1
    affinity = len(os.sched_getaffinity(0))
    proc2, _ = v2_tree(tmp_path / "big", cpu__max=f"{(affinity + 8) * 100000} 100000")
    assert available_cpus(proc_root=proc2) == affinity


def test_available_cpus_without_a_quota_is_the_affinity(tmp_path):
    proc, _ = v2_tree(tmp_path, cpu__max="max 100000")
    assert available_cpus(proc_root=proc) == len(os.sched_getaffinity(0))


# ---------------------------------------------------------------- memory_room


FakeVM = namedtuple("FakeVM", "total available")


def test_memory_room_prefers_the_cgroup_when_limited(tmp_path, monkeypatch):
    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeVM(64 * GIB, 32 * GIB))
    proc, mount = v2_tree(tmp_path, memory__max=str(4 * GIB), memory__current=str(GIB))
    room = memory_room(proc_root=proc)
    assert room == MemoryRoom(4 * GIB, 3 * GIB, f"cgroup v2 {mount / 'app'}")


def test_memory_room_caps_the_cgroup_by_the_system(tmp_path, monkeypatch):
    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeVM(8 * GIB, 2 * GIB))
    proc, _ = v2_tree(tmp_path, memory__max=str(100 * GIB), memory__current=str(GIB))
    room = memory_room(proc_root=proc)
    assert (room.total, room.available) == (8 * GIB, 2 * GIB)
    assert room.source.startswith("cgroup v2 ")


def test_memory_room_falls_back_to_the_system(tmp_path, monkeypatch):
    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeVM(8 * GIB, 5 * GIB))
    proc, _ = v2_tree(tmp_path, memory__max="max", memory__current=str(GIB))
    assert memory_room(proc_root=proc) == MemoryRoom(8 * GIB, 5 * GIB, "system")


def test_memory_room_on_this_machine_is_sane():
    room = memory_room()
    assert 0 < room.available <= room.total


# ---------------------------------------------------------------- /dev/shm


def test_shm_room_of_a_tmp_dir(tmp_path):
    room = shm_room(str(tmp_path))
    assert room is not None and 0 < room.free <= room.total
    assert shm_room(str(tmp_path / "missing")) is None


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this system")
def test_check_shm_raises_on_real_dev_shm_with_an_absurd_budget():
    with pytest.raises(SharedMemoryError) as info:
        check_shm(2**62)
    text = str(info.value)
    assert "/dev/shm" in text and "MiB" in text and str(2**62 // MIB) in text.replace(".0", "")
    assert "--shm-size=2g" in text and "shm_budget=" in text and "fewer workers" in text


def test_check_shm_on_a_tmp_dir(tmp_path):
    room = check_shm(MIB, path=str(tmp_path))
    assert room is not None and room.free >= MIB
    with pytest.raises(SharedMemoryError, match="--shm-size"):
        check_shm(room.total + GIB, path=str(tmp_path))


def test_check_shm_uses_the_free_room_in_its_message(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "shm_room", lambda path: memory.ShmRoom(path, 64 * MIB, 10 * MIB))
    with pytest.raises(SharedMemoryError) as info:
        check_shm(20 * MIB, path="/dev/shm")
    assert "10.0 MiB free of 64.0 MiB" in str(info.value) and "20.0 MiB" in str(info.value)
    assert check_shm(10 * MIB) is not None  # exactly enough room passes
    with pytest.raises(SharedMemoryError):
        check_shm(10 * MIB + 1)  # one byte more does not


def test_check_shm_missing_path_warns_and_does_not_raise(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="dataloader"):
        assert check_shm(GIB, path=str(tmp_path / "missing")) is None
    assert "shared-memory size check" in caplog.text


def test_check_shm_rejects_a_negative_budget(tmp_path):
    with pytest.raises(ArgumentValueError, match="budget_bytes"):
        check_shm(-1, path=str(tmp_path))


# ---------------------------------------------------------------- process tree


def test_process_tree_memory_counts_a_child():
    alone = process_tree_memory()
    assert alone.processes >= 1 and alone.rss > 0
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        own_rss = psutil.Process().memory_info().rss
        tree = process_tree_memory()
        assert tree.processes >= 2
        child_rss = psutil.Process(child.pid).memory_info().rss
        assert tree.rss >= own_rss + child_rss // 2 > own_rss
        assert child.pid in {p.pid for p in psutil.Process().children(recursive=True)}
        only_child = process_tree_memory(child.pid)
        assert only_child.processes == 1 and 0 < only_child.rss < tree.rss
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="the kernel has no smaps_rollup")
def test_process_tree_memory_reports_the_shared_memory_it_maps():
    size = 16 * 2**20
    fd = os.memfd_create("tree-memory-test")
    try:
        os.ftruncate(fd, size)
        before = process_tree_memory()
        with mmap.mmap(fd, size) as mapping:
            np.frombuffer(mapping, np.uint8)[:] = 1  # touch every page
            touched = process_tree_memory()
    finally:
        os.close(fd)
    assert before.pss_shmem is not None and touched.pss_shmem is not None
    assert touched.pss_shmem - before.pss_shmem >= size * 0.9
    assert touched.pss_shmem <= touched.pss


def test_process_tree_memory_of_a_gone_process():
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert process_tree_memory(done.pid) == memory.TreeMemory(0, None, 0)


def test_process_tree_memory_skips_processes_that_deny_access(monkeypatch):
    def deny(self):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "memory_full_info", deny)
    tree = process_tree_memory()
    assert tree.processes >= 1 and tree.rss > 0 and tree.pss is None


# ---------------------------------------------------------------- check_worker_memory

ROOM = MemoryRoom(total=10 * GIB, available=8 * GIB, source="cgroup v2 /test")


def test_check_worker_memory_warns_when_need_is_large(caplog):
    with caplog.at_level(logging.WARNING, logger="dataloader"):
        est = check_worker_memory(8, GIB, 512 * MIB, room=ROOM)
    assert est.need == 8 * GIB + 512 * MIB and est.warned and est.available == 8 * GIB
    records = [r for r in caplog.records if r.name == "dataloader" and r.levelno == logging.WARNING]
    assert len(records) == 1
    text = records[0].getMessage()
    assert "8 workers" in text and "1024.0 MiB" in text and "8704.0 MiB" in text
    assert "8192.0 MiB available" in text and "cgroup v2 /test" in text
    assert "fewer workers" in text and "NumPy arrays or Arrow tables" in text
    assert "copy-on-write" in text and "shm_budget" in text


def test_check_worker_memory_is_silent_when_need_is_small(caplog):
    with caplog.at_level(logging.DEBUG, logger="dataloader"):
        est = check_worker_memory(2, 100 * MIB, 64 * MIB, room=ROOM)
    assert not est.warned and est.need == 264 * MIB
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_check_worker_memory_threshold_is_eighty_percent(caplog):
    room = MemoryRoom(1000 * MIB, 1000 * MIB, "system")
    assert not check_worker_memory(1, 800 * MIB, 0, room=room).warned
    assert check_worker_memory(1, 800 * MIB + 1, 0, room=room).warned


def test_check_worker_memory_defaults_to_this_process_rss():
    est = check_worker_memory(1, None, 0, room=ROOM)
    rss = psutil.Process().memory_info().rss
    assert 0.5 * rss < est.per_worker_bytes < 2 * rss


def test_check_worker_memory_uses_memory_room_by_default(monkeypatch):
    monkeypatch.setattr(memory, "memory_room", lambda: MemoryRoom(GIB, 100 * MIB, "fake"))
    est = check_worker_memory(4, 50 * MIB, 0)
    assert est.warned and est.source == "fake"


def test_check_worker_memory_rejects_negative_workers():
    with pytest.raises(ArgumentValueError, match="num_workers"):
        check_worker_memory(-1, 0, 0, room=ROOM)


# ---------------------------------------------------------------- diagnosis text


def test_describe_oom_near_the_limit(tmp_path):
    proc, mount = v2_tree(tmp_path, memory__max=str(1000 * MIB), memory__current=str(950 * MIB))
    text = describe_oom(proc_root=proc)
    assert "950.0 MiB" in text and "1000.0 MiB limit" in text and "95%" in text
    assert str(mount / "app") in text and "OOM killer is the likely cause" in text


def test_describe_oom_far_from_the_limit(tmp_path):
    proc, _ = v2_tree(tmp_path, memory__max=str(1000 * MIB), memory__current=str(100 * MIB))
    text = describe_oom(proc_root=proc)
    assert "100.0 MiB" in text and "10%" in text and "unlikely" in text


def test_describe_oom_reports_recorded_kills(tmp_path):
    proc, _ = v1_tree(
        tmp_path, "4:memory:/job", "rw,memory", memory__limit_in_bytes="1000",
        memory__usage_in_bytes="10", memory__oom_control="oom_kill_disable 0\noom_kill 3\n",
    )
    assert "recorded 3 OOM kill(s)" in describe_oom(proc_root=proc)


def test_describe_oom_unlimited_uses_the_system(tmp_path, monkeypatch):
    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeVM(100 * MIB, 5 * MIB))
    proc, _ = v2_tree(tmp_path, memory__max="max", memory__current="1")
    text = describe_oom(proc_root=proc)
    assert "no cgroup memory limit" in text and "95.0 MiB of 100.0 MiB" in text
    assert "likely cause" in text and "unlikely" not in text


def test_describe_oom_never_raises(tmp_path, monkeypatch):
    def boom(proc_root):
        raise RuntimeError("broken")

    monkeypatch.setattr(memory, "cgroup_memory", boom)
    assert "could not read" in describe_oom(proc_root=str(tmp_path))


def test_describe_shm(tmp_path, monkeypatch):
    text = describe_shm(str(tmp_path))
    assert str(tmp_path) in text and "free of" in text and "MiB" in text
    assert "missing" in describe_shm(str(tmp_path / "missing"))
    monkeypatch.setattr(memory, "shm_room", lambda path: memory.ShmRoom(path, 64 * MIB, MIB))
    full = describe_shm("/dev/shm")
    assert "1.0 MiB free of 64.0 MiB" in full and "SIGBUS" in full and "--shm-size" in full


# ---------------------------------------------------------------- import hygiene


def test_import_has_no_side_effects():
    # psutil itself reads /proc/stat when imported; import it first so only our module is judged.
    code = (
        "import builtins, psutil; opened = []; real = builtins.open\n"
        "builtins.open = lambda *a, **k: (opened.append(a[0]), real(*a, **k))[1]\n"
        "import dataloader.memory\n"
        "print([p for p in opened if str(p).startswith(('/proc', '/sys', '/dev'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_peak_memory_keeps_the_peak_of_the_process_tree():
    from dataloader.memory import PeakMemory

    with PeakMemory(interval=0.01) as memory:
        baseline = memory.peak_pss
        block = np.ones(64 * MIB, dtype=np.uint8)  # 64 MiB, every page touched
        memory.sample()
        peak = memory.peak_pss
        del block
        memory.sample()
        assert memory.peak_pss == peak  # a peak, not the latest sample
        memory.reset()  # the 64 MiB are gone: the peak from here on is lower
        memory.sample()
    assert baseline > 0 and peak >= baseline + 48 * MIB
    assert 0 < memory.peak_pss < peak - 32 * MIB
