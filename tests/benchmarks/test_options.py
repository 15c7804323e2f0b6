"""benchmarks.options: the shared options read the same way in every tool."""

import argparse

import pytest

from benchmarks.options import (
    add_json, add_quick, add_reps, add_seconds, add_workers, add_workloads, comma_list, new_parser,
)


def _parser() -> argparse.ArgumentParser:
    parser = new_parser("A tool.\n\nMore about it.")
    add_quick(parser, "short")
    add_reps(parser, 3)
    add_seconds(parser, 1.5)
    add_workloads(parser, "images,tiny", ("images", "tiny"))
    add_workers(parser, [2])
    add_json(parser)
    return parser


def test_defaults_and_lists():
    parser = _parser()
    assert parser.description == "A tool."
    args = parser.parse_args([])
    assert (args.quick, args.reps, args.seconds, args.json) == (False, 3, 1.5, None)
    assert args.workloads == ["images", "tiny"] and args.workers == [2]
    args = parser.parse_args(["--workloads", " tiny,", "--workers", "0, 2", "--json", "out.json"])
    assert args.workloads == ["tiny"] and args.workers == [0, 2] and args.json == "out.json"


def test_unknown_workloads_and_bad_numbers_are_refused(capsys):
    parser = _parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--workloads", "images,decode"])
    assert "unknown workload(s) ['decode']: choose among images,tiny" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--workers", "two"])
    assert "--workers" in capsys.readouterr().err
    assert comma_list(float)("0,2.5,") == [0.0, 2.5]


def test_seconds_reps_and_workers_are_refused_as_they_are_read(capsys):
    from dataloader.memory import max_workers

    parser = _parser()
    for argv, message in [
        (["--seconds", "nan"], "argument --seconds: expected a finite number > 0; got 'nan'"),
        (["--seconds", "inf"], "argument --seconds: expected a finite number > 0; got 'inf'"),
        (["--reps", "0"], "argument --reps: expected an integer >= 1; got '0'"),
        (["--workers", f"2,{max_workers()[0] + 1}"], f"expected a number of workers from 0 to {max_workers()[0]}"),
    ]:
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert message in capsys.readouterr().err


def test_json_is_tried_when_read_and_the_usage_line_names_the_tool(tmp_path, capsys):
    parser = new_parser("A tool.", "python -m benchmarks.tool")
    add_json(parser)
    assert parser.format_usage().startswith("usage: python -m benchmarks.tool ")
    assert parser.parse_args(["--json", str(tmp_path / "out.json")]).json == str(tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
    with pytest.raises(SystemExit):
        parser.parse_args(["--json", str(tmp_path / "no" / "out.json")])
    assert "argument --json: cannot write" in capsys.readouterr().err
