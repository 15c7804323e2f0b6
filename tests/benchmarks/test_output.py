"""benchmarks.output: cells, aligned tables and JSON files."""

import json
from dataclasses import dataclass

from benchmarks.output import aligned, cell, write_json, write_runs


def test_a_cell_says_dash_for_nothing_measured():
    assert cell(None, ".2f") == "-"
    assert cell(1234.5, ",.0f") == "1,234"
    assert cell("ours") == "ours" and cell(2) == "2"


def test_a_table_aligns_its_columns_under_a_rule():
    cells = [["name", "rate"], ["a", "1"], ["longer", "1,000"]]
    assert aligned(cells, "<").splitlines() == [
        "name     rate", "-------------", "a           1", "longer  1,000",
    ]


def test_minimum_widths_separator_and_no_rule():
    cells = [["w", "x", "y"], ["a", "1", "b"]]
    assert aligned(cells, "<><", widths=(3, 4), sep=" ", rule=False).splitlines() == [
        "w      x y", "a      1 b",
    ]


def test_runs_and_rows_are_written_as_json(tmp_path):
    @dataclass
    class Run:
        rep: int
        rate: float

    path = tmp_path / "runs.json"
    write_runs(str(path), [Run(0, 1.5)], [{"rate": 1.5}])
    assert json.loads(path.read_text()) == {"runs": [{"rep": 0, "rate": 1.5}], "rows": [{"rate": 1.5}]}
    write_json(str(path), {"a": [1]})
    assert path.read_text() == '{\n "a": [\n  1\n ]\n}'
