"""docs/cli.md and the parsers agree, and every option has help text.

Each command's section of docs/cli.md (``## `demo```, ..., ``## `tune```) has an option
table; its options are exactly the parser's. The options in the section's usage lines and
example command lines (``$ python -m dataloader ...``) exist too. Tools that build their parser
inside ``parse_args``/``main`` (the benchmarks of ``benchmarks/``): :func:`parser_of` catches it
as it starts parsing.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Callable

import pytest

from dataloader._cli import bench, convert, demo, doctor, tune

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


class _Caught(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(
    call: Callable[[], object], monkeypatch: pytest.MonkeyPatch
) -> argparse.ArgumentParser:
    """The parser ``call`` builds, taken when it starts parsing (so nothing runs)."""

    def catch(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Caught(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
    with pytest.raises(_Caught) as caught:
        call()
    return caught.value.parser


def command_parser(module: object) -> argparse.ArgumentParser:
    commands = argparse.ArgumentParser().add_subparsers()
    module.add_parser(commands)  # type: ignore[attr-defined]
    return next(iter(commands.choices.values()))


# heading on docs/cli.md -> how to get its parser
DOCUMENTED = {
    "demo": lambda mp: command_parser(demo),
    "doctor": lambda mp: command_parser(doctor),
    "convert": lambda mp: command_parser(convert),
    "tune": lambda mp: command_parser(tune),
    "bench": lambda mp: command_parser(bench),
}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help")}


def section(name: str) -> str:
    """The text under ``## `name``` or ``### `name```, up to the next heading."""
    text = CLI_DOC.read_text(encoding="utf-8")
    match = re.search(rf"^##+ `{re.escape(name)}`\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    assert match, f"docs/cli.md has no section for `{name}`"
    return match.group(1)


def table_options(text: str) -> set[str]:
    """The options in the first cells of the tables whose first column is ``option``."""
    found: set[str] = set()
    for table in re.findall(r"^\| option \|.*?(?=^[^|]|\Z)", text, re.S | re.M):
        for first in re.findall(r"^\| ([^|]*)\|", table, re.M)[2:]:  # past the header and rule
            found |= set(re.findall(r"`(-{1,2}[\w-]+)", first))
    return found


def command_line_options(text: str, command: str) -> set[str]:
    """The options on usage and example lines of ``python -m dataloader <command>``."""
    found: set[str] = set()
    # The command (not a longer one), then the line and its continuations.
    usage = rf"^\$? ?python -m dataloader {command}(?![\w-])"
    for line in re.findall(usage + r"(.*(?:\n {10,}.*)*)", text, re.M):
        found |= set(re.findall(r"(?<![\w-])(-{1,2}[a-z][\w-]*)", line.split("#")[0]))
    return found


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_options_are_the_parsers(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = options(DOCUMENTED[name](monkeypatch))
    text = section(name)
    documented = table_options(text)
    assert documented, f"no option table under `{name}`"
    assert not documented - real, f"`{name}`: documented, but not options: {documented - real}"
    assert not real - documented, f"`{name}`: options missing from docs/cli.md: {real - documented}"
    shown = command_line_options(text, name)
    assert not shown - real, f"`{name}`: usage or example lines name unknown options {shown - real}"


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_option_has_help(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = DOCUMENTED[name](monkeypatch)
    silent = (None, "", argparse.SUPPRESS)
    bare = [a.option_strings or a.dest for a in parser._actions if a.help in silent]
    assert not bare, f"{name}: options without help text: {bare}"


def test_every_command_has_help(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataloader.__main__ import main

    parser = parser_of(lambda: main(["doctor"]), monkeypatch)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {c.dest: bool(c.help) for c in commands._choices_actions} == dict.fromkeys(
        ["demo", "bench", "doctor", "convert", "tune"], True
    )


def _doctor_rows(output: str) -> list[str]:
    """The row names of doctor's report: each line's text before its first run of 2+ spaces,
    up to the blank line before the recommendation."""
    report = output.split("\n\n", 1)[0]
    return [re.split(r" {2,}", line, maxsplit=1)[0] for line in report.splitlines() if line.strip()]


def test_doctor_section_lists_the_rows_doctor_prints(capsys: pytest.CaptureFixture[str]) -> None:
    class Args:
        scan = None
        batch_bytes = 2**20  # a small segment to probe: this test is about the rows' names

    doctor.run(Args())  # type: ignore[arg-type]
    printed = _doctor_rows(capsys.readouterr().out)
    assert "worker threads" in printed and len(printed) >= 10
    text = section("doctor")
    table = re.search(r"^\| row \|.*?(?=^[^|]|\Z)", text, re.S | re.M)
    assert table, "the `doctor` section has no `| row | what it checks |` table"
    listed = re.findall(r"^\| ([^|]*?) \|", table.group(), re.M)[2:]  # past the header and rule
    assert listed == printed, "docs/cli.md's table of doctor's rows is not what doctor prints"
    sample = re.search(r"^\$ python -m dataloader doctor\n(.*?)^```", text, re.S | re.M)
    assert sample, "the `doctor` section has no sample output of `$ python -m dataloader doctor`"
    assert _doctor_rows(sample.group(1)) == printed, "docs/cli.md's sample output of doctor is stale"
