"""Every bench refuses bad options up front, as the library's commands do
(tests/_cli/test_refusals.py): numbers must be finite, worker counts have the loader's ceiling,
output files are tried before a run, and every option has help text."""

from __future__ import annotations

import argparse
import importlib

import pytest

from dataloader.memory import max_workers
from tests._cli.test_cli_doc import parser_of
from tests._cli.test_refusals import _reads

BENCHES = ["compare", "floor", "gpu", "vision", "columnar", "raydata", "autotune", "resume", "packing"]


def _parser(name: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    if name == "vision":
        pytest.importorskip("cv2", reason="the vision bench needs OpenCV")
    module = importlib.import_module(f"benchmarks.{name}")
    parse = module.parse_args if hasattr(module, "parse_args") else module.main
    return parser_of(lambda: parse([]), monkeypatch)


@pytest.mark.parametrize("name", BENCHES)
def test_every_option_has_help_and_no_number_takes_nan(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a path option tried on "1" writes nothing in the checkout
    parser = _parser(name, monkeypatch)
    bare = [a.option_strings for a in parser._actions if a.help in (None, "")]
    assert not bare, f"{name}: options without help text: {bare}"
    for action in [a for a in parser._actions if a.option_strings and a.type is not None]:
        if _reads(action.type) is float:
            assert action.type is not float, f"{name} {action.option_strings}: plain float lets nan through"
            for text in ("nan", "inf", "-1"):
                with pytest.raises((argparse.ArgumentTypeError, ValueError)):
                    action.type(text)


@pytest.mark.parametrize("name", ["compare", "columnar", "raydata", "autotune"])
def test_absurd_worker_counts_and_unwritable_outputs_are_refused_before_running(name, tmp_path, capsys):
    main = importlib.import_module(f"benchmarks.{name}").main
    for argv, said in [(["--workers", "100000"], f"expected a number of workers from 0 to {max_workers()[0]}"),
                       (["--json", str(tmp_path / "missing" / "out.json")], "argument --json: cannot write")]:
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert said in capsys.readouterr().err
