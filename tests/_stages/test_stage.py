"""The stage contract: iterate upstream, close once, release first, then close upstream."""

import pytest

from dataloader._stages.consumer import Echo, MapBatches
from dataloader._stages.stage import Stage


class Recorded:
    def __init__(self, items, log):
        self._items = iter(items)
        self.log = log

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._items)

    def close(self):
        self.log.append("upstream closed")


class Holding(Stage):
    def __next__(self):
        return next(self.upstream)

    def _release(self):
        self.upstream.log.append("released")


def test_close_releases_then_closes_upstream_exactly_once():
    log = []
    stage = Holding(Recorded([1, 2], log))
    assert next(stage) == 1
    stage.close()
    stage.close()
    assert log == ["released", "upstream closed"]
    assert stage.closed


def test_upstream_is_closed_even_when_releasing_fails():
    log = []

    class Failing(Holding):
        def _release(self):
            raise RuntimeError("release failed")

    with pytest.raises(RuntimeError, match="release failed"):
        Failing(Recorded([], log)).close()
    assert log == ["upstream closed"]


def test_a_chain_closes_from_the_outermost_stage_down():
    log = []
    chain = Echo(MapBatches(Recorded([1, 2], log), lambda x: x * 10), repeats=2)
    assert list(chain) == [10, 10, 20, 20]
    chain.close()
    assert log == ["upstream closed"]


def test_upstream_without_close_is_fine():
    stage = MapBatches(iter([1]), str)
    assert list(stage) == ["1"]
    stage.close()


def test_a_stage_without_next_says_so():
    with pytest.raises(NotImplementedError, match="Stage must define __next__"):
        next(Stage(iter(())))
