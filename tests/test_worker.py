import dataclasses
import threading

import pytest

from dataloader import WorkerInfo, get_worker_info
from dataloader._local import set_worker_info


def test_main_process_has_no_worker_info():
    assert get_worker_info() is None


def test_worker_info_aliases_and_immutability():
    info = WorkerInfo(id=1, num_workers=4, seed=99, dataset="d")
    assert (info.idx, info.worker) == (1, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.id = 2


def test_worker_info_is_per_thread():
    seen = {}

    def worker():
        set_worker_info(WorkerInfo(0, 1, 0, None))
        seen["thread"] = get_worker_info()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["thread"].id == 0
    assert get_worker_info() is None
