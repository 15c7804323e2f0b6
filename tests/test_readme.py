"""The README's two set-up commands are what CI and users run."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands():
    text = (ROOT / "README.md").read_text()
    assert text.index("```bash") < 40, "the set-up commands must come first"
    commands = readme_commands()
    assert len(commands) == 2
    assert "python -m dataloader demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    """Verbatim, and stopping CI when either half fails: under set -e a failure on the left of
    && does not stop the script, so the line ends with || exit 1."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] + " || exit 1" in ci.splitlines()
    assert "set -euo pipefail" in ci


def ci_lines():
    return (ROOT / ".ci" / "run").read_text().splitlines()


def upgrades_pip(line):
    """Whether a shell line upgrades pip (`pip install -U pip`, `--upgrade pip`, ensurepip)."""
    code = line.split("#", 1)[0]
    return bool(re.search(r"pip install\b.*(-U|--upgrade)\b.*\bpip\b(?![-.\w])", code)
                or "ensurepip --upgrade" in code)


def test_ci_runs_the_readme_test_command_with_the_pip_the_venv_brings():
    """A new user does not upgrade pip first; CI upgrading it hid that the pips Python 3.10-3.13
    bring could not resolve the test extra (issue 45)."""
    lines = ci_lines()
    command = lines.index(readme_commands()[1] + " || exit 1")
    venv = next(i for i, line in enumerate(lines) if re.search(r"-m venv\b", line))
    assert venv < command
    assert not [line for line in lines[venv:command] if upgrades_pip(line)]
    assert upgrades_pip("python -m pip install --quiet --upgrade pip")
    assert not upgrades_pip('pip install --quiet -e ".[test]"  # then --upgrade pip-tools')


def test_ci_resolves_both_readme_commands_with_each_bundled_pip():
    """A step makes a fresh venv of each Python 3.10-3.14 and free-threaded 3.14t found and, with
    its own pip, resolves the README's two installs (`pip install --dry-run`), under a time bound."""
    ci = (ROOT / ".ci" / "run").read_text()
    loop = "for version in 3.10 3.11 3.12 3.13 3.14 3.14t"
    assert loop in ci
    dry_runs = [line for line in ci_lines() if "--dry-run" in line and not line.lstrip().startswith("#")]
    for extra in ('-e ".[test]"', '".[vision]"'):
        assert [line for line in dry_runs if extra in line and "timeout " in line], extra
    step = ci[ci.index(loop):]
    step = step[:step.index("\ndone")]
    assert not [line for line in step.splitlines() if upgrades_pip(line)]


def test_the_test_extra_names_aiobotocore_itself():
    """s3fs needs aiobotocore, which caps botocore near its own release, while moto[s3] asks for
    boto3 and botocore uncapped. The resolvers of pip 23.0-24.2 pin requirements nearest the
    request first: with aiobotocore two levels down (test -> remote -> s3fs), they took the newest
    boto3 and botocore, then backtracked through every s3fs and aiobotocore release (pip 23.0: over
    7 minutes; 23.2, 24.2: ResolutionImpossible). Named in the test extra, next to moto, it is
    pinned first and botocore and boto3 follow its cap."""
    toml = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")  # pytest brings tomli
    extras = toml.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower() for req in extras["test"]}
    assert "moto" in names and "aiobotocore" in names, sorted(names)
