import math

import numpy as np
import pytest

from dataloader import ArrayDataset, Collated, DataLoader, ReplacementSampler, ThreadBuffer
from dataloader import _validate as v
from dataloader.monitor import MonitorSettings
from dataloader.errors import ArgumentTypeError, ArgumentValueError


@pytest.mark.parametrize("value", [0, -3])
def test_positive_int_rejects_small_values_with_the_name(value):
    with pytest.raises(ArgumentValueError, match=rf"`batch_size` must be a positive integer; got {value}\."):
        v.check_positive_int("batch_size", value)


@pytest.mark.parametrize("value", [1.0, "2", True, None])
def test_positive_int_rejects_other_types(value):
    with pytest.raises(ArgumentTypeError, match="`n`"):
        v.check_positive_int("n", value)


def test_errors_are_value_and_type_errors():
    with pytest.raises(ValueError):
        v.check_non_negative_int("num_workers", -1)
    with pytest.raises(TypeError):
        v.check_bool("drop_last", 1)


def test_non_negative_number_rejects_nan_and_negatives():
    assert v.check_non_negative_number("timeout", 0) == 0.0
    for bad in (-1, math.nan):
        with pytest.raises(ArgumentValueError, match="`timeout`"):
            v.check_non_negative_number("timeout", bad)


def test_seed_range():
    assert v.check_optional_seed("seed", None) is None
    with pytest.raises(ArgumentValueError):
        v.check_optional_seed("seed", -1)
    with pytest.raises(ArgumentValueError):
        v.check_optional_seed("seed", 2**64)


def test_has_apply_names_the_fix():
    with pytest.raises(ArgumentTypeError, match="`collator` must be a Collator.*apply"):
        v.check_has_apply("collator", object(), "Collator")


def test_choice():
    with pytest.raises(ArgumentValueError, match="'a', 'b'"):
        v.check_choice("mode", "c", ("a", "b"))


def test_timeout_infinity_waits_forever_and_a_wait_poll_cannot_do_is_refused():
    assert v.check_timeout("timeout", math.inf) == 0.0  # like 0: wait forever
    assert v.check_timeout("timeout", 2.5) == 2.5
    assert v.check_timeout("timeout", v.MAX_TIMEOUT) == v.MAX_TIMEOUT
    # poll() takes a C int of milliseconds: 2**31 ms overflowed at the first wait.
    for too_long in (2**31 / 1000, 1e12):
        with pytest.raises(ArgumentValueError, match=r"`timeout` must be at most 2147483 seconds .*; got"):
            v.check_timeout("timeout", too_long)
    for bad in (-1, math.nan):
        with pytest.raises(ArgumentValueError, match="`timeout` must be a number >= 0"):
            v.check_timeout("timeout", bad)


def test_has_apply_refuses_the_class_in_place_of_an_instance():
    from dataloader import Collator
    from dataloader.transform import PseudoTransform

    for cls, kind in ((PseudoTransform, "Transform"), (Collator, "Collator")):
        with pytest.raises(ArgumentTypeError, match=rf"must be a {kind} instance; got the class {cls.__name__}\. "
                           rf"Pass an instance, {cls.__name__}\(\.\.\.\), not the class itself\."):
            v.check_has_apply("x", cls, kind)


class _Sized:
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


class _Unsized:
    def __len__(self):
        raise TypeError("no length")


def test_check_len_refuses_what_len_would_refuse_later():
    import numpy as np

    assert v.check_len("dataset", _Sized(3)) == 3
    assert type(v.check_len("dataset", _Sized(np.int64(3)))) is int
    assert v.check_len("dataset", object()) is None
    assert v.check_len("sampler", _Unsized()) is None
    with pytest.raises(ArgumentValueError, match=r"`len\(dataset\)` must be a non-negative integer; "
                       r"_Sized.__len__ returned -1\."):
        v.check_len("dataset", _Sized(-1))
    with pytest.raises(ArgumentTypeError, match=r"_Sized.__len__ returned 2.5\."):
        v.check_len("dataset", _Sized(2.5))


# -- NaN, infinity and numbers too large for a float, in every float-valued option ------------


def test_a_timeout_too_large_for_a_float_is_refused_not_an_overflow():
    for name, build in (
        ("DataLoader", lambda t: DataLoader(ArrayDataset(np.arange(4)), timeout=t)),
        ("ThreadBuffer", lambda t: ThreadBuffer(range(3), timeout=t)),
    ):
        with pytest.raises(ArgumentValueError, match=r"`timeout` must be at most 2147483 seconds .*integer of 1329 bits"):
            build(10**400)  # was OverflowError: int too large to convert to float
    with pytest.raises(ArgumentValueError, match="that fits a float; got an integer of 1329 bits"):
        v.check_non_negative_number("seconds", 10**400)


def _loader(**kwargs):
    return DataLoader(ArrayDataset(np.arange(4)), **kwargs)


NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    "build",
    [
        lambda x: _loader(timeout=x),
        lambda x: ThreadBuffer(range(3), timeout=x),
        lambda x: _loader(on_error="skip", max_errors=x),
        lambda x: ReplacementSampler(range(4), weights=[1.0, x, 1.0, 1.0]),
        lambda x: Collated(np.zeros(2), x),
    ],
    ids=["loader-timeout", "buffer-timeout", "max_errors", "weights", "collated-size"],
)
def test_nan_is_refused_by_every_float_option(build):
    for nan in (NAN, np.float64(NAN), np.float32(NAN)):
        with pytest.raises((ArgumentValueError, ArgumentTypeError)):
            build(nan)


@pytest.mark.parametrize(
    "build",
    [
        lambda x: _loader(on_error="skip", max_errors=x),
        lambda x: ReplacementSampler(range(4), weights=[1.0, x, 1.0, 1.0]),
        lambda x: Collated(np.zeros(2), x),
    ],
    ids=["max_errors", "weights", "collated-size"],
)
def test_infinity_is_refused_where_it_means_nothing(build):
    with pytest.raises((ArgumentValueError, ArgumentTypeError)):
        build(INF)


def test_an_infinite_timeout_still_waits_forever():
    assert _loader(timeout=INF).options.timeout == 0.0
    assert ThreadBuffer(range(3), timeout=np.float64(INF)).timeout == 0.0


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "NaN"])
def test_a_monitor_interval_of_nan_or_infinity_falls_back_to_the_default(raw, caplog):
    settings = MonitorSettings.from_env({"DATALOADER_MONITOR": "1", "DATALOADER_MONITOR_INTERVAL": raw})
    assert settings.log_interval is not None and math.isfinite(settings.log_interval)
    assert "is not a number of seconds >= 0" in caplog.text
