"""The documentation cannot rot.

- Every fenced block in README.md and docs/**/*.md names its language. ```python blocks run:
  the blocks of one page run in order, as one script in a fresh interpreter (a block may use
  names an earlier block of its page defined); each should take well under 5 s. ```text
  blocks are output or syntax, not code. A block preceded by a ``<!-- no-test: REASON -->``
  line is only shown, not run, and the marker must say why (it needs a GPU, a framework that
  is not installed, ...). Shell blocks (```bash) need that marker, except the README's set-up
  commands, which tests/test_readme.py holds to what CI runs.
- Shown output is checked where it is deterministic: a line ``print(...)  # -> TEXT`` must
  print TEXT each time it runs (runs of spaces and line breaks compare equal, so a NumPy
  array's rows may share one line), and must run. ``# -> A, then B`` is a line that runs twice,
  printing A, then B. ``# -> TEXT  # note`` adds a note that is not compared. A plain
  ``# ...`` comment after a print (a loop's changing output, a random value) is not checked.
  tests/_doc_expect.py does the checking.
- Every relative link in docs/**/*.md and README.md points at a file that exists, and every
  page is in the site's navigation (mkdocs.yml; CI builds the site with ``--strict``).
- Every public name of ``dataloader`` and ``dataloader.transform`` appears in docs/api/.
- Every error message and warning the core raises appears in docs/troubleshooting.md.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

import dataloader
import dataloader.transform
from tests import _doc_expect

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
# Per block: examples are meant to take well under 5 s; the bound leaves room for a loaded CI.
EXAMPLE_TIMEOUT = 60
SHELLS = {"bash", "sh", "shell", "console"}

_FENCE = re.compile(r"^```(?P<lang>[^`\n]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
_NO_TEST = re.compile(r"^<!-- no-test: (?P<reason>\S.*?) -->$")
_ANY_NO_TEST = re.compile(r"^.*<!-- *no-test.*$", re.M)
_EXPECT = re.compile(r"^(?P<indent>[ \t]*)print\((?P<args>.*)\)[ \t]*# -> (?P<expected>.*?)[ \t]*$")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


class Block(NamedTuple):
    page: str  # relative to the repository
    line: int  # the block's first line of code, on its page
    lang: str
    code: str
    no_test: str | None  # the reason given in the marker before it, if any


def doc_files() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def example_files() -> list[Path]:
    return [README, *doc_files()]


def blocks() -> list[Block]:
    """Every fenced block of README.md and docs/, in page order."""
    found = []
    for path in example_files():
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marker = _NO_TEST.match(before)
            line = text.count("\n", 0, match.start()) + 2  # the block's first line of code
            page = str(path.relative_to(ROOT))
            lang = match.group("lang").strip()
            found.append(Block(page, line, lang, match.group("code"), marker and marker["reason"]))
    return found


def python_blocks() -> list[Block]:
    """Every runnable ```python block, in page order."""
    return [b for b in blocks() if b.lang == "python" and b.no_test is None]


def pages_with_examples() -> list[str]:
    return sorted({b.page for b in python_blocks()})


def with_checks(code: str, first_line: int) -> tuple[str, list[tuple[int, int]]]:
    """``code`` with each ``print(...)  # -> TEXT`` line made a check of its output (on the same
    line, so line numbers hold), and (page line, outputs shown) of each check."""
    lines, checked = code.split("\n"), []
    for i, text in enumerate(lines):
        match = _EXPECT.match(text)
        if match:
            shown = match["expected"].split("  # ", 1)[0].split(", then ")  # `# -> 3  # a note`
            checked.append((first_line + i, len(shown)))
            lines[i] = (f"{match['indent']}__import__('_doc_expect').check("
                        f"{first_line + i}, {shown!r}, {match['args']})")
    return "\n".join(lines), checked


def page_script(page: str) -> tuple[str, list[tuple[int, int]], list[tuple[int, int]]]:
    """The page's blocks as one script (a block may use names an earlier one defined),
    (script line, page line) where each block starts, and (page line, outputs shown) of each
    output check."""
    parts, starts, checked, script_line = [], [], [], 1
    for block in python_blocks():
        if block.page != page:
            continue
        starts.append((script_line, block.line))
        code, checks = with_checks(block.code, block.line)
        parts.append(code)
        checked += checks
        script_line += code.count("\n")
    return "".join(parts), starts, checked


def _page_line(starts: list[tuple[int, int]], script_line: int) -> int:
    """The page line of a script line."""
    first, line = max((s for s in starts if s[0] <= script_line), default=(1, 1))
    return line + script_line - first


@pytest.mark.parametrize("page", pages_with_examples())
def test_examples_run(page: str, tmp_path: Path) -> None:
    code, starts, checked = page_script(page)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    shutil.copy(Path(__file__).with_name("_doc_expect.py"), tmp_path)  # the output checks
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATALOADER_", "MGE_DATA_")) and key not in ("WORLD_SIZE", "RANK")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT * len(starts),
    )
    failing = re.findall(r'File ".*?example\.py", line (\d+)', result.stderr)
    where = f"{page}:{_page_line(starts, int(failing[-1]))}" if failing else page
    assert result.returncode == 0, (
        f"an example failed at {where} (exit code {result.returncode}):\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    ran_file = tmp_path / _doc_expect.RAN
    ran = Counter(int(n) for n in ran_file.read_text().split()) if ran_file.exists() else Counter()
    short = [f"line {line}: {ran[line]} of {times}" for line, times in checked if ran[line] < times]
    assert not short, f"{page}: output checks that ran fewer times than the outputs shown: {short}"


def test_there_are_examples() -> None:
    assert len(python_blocks()) >= 20
    assert "README.md" in pages_with_examples()


def test_output_is_checked_somewhere() -> None:
    checks = [line for page in pages_with_examples() for line in page_script(page)[2]]
    assert len(checks) >= 30


def test_every_block_names_its_language() -> None:
    bare = [f"{b.page}:{b.line - 1}" for b in blocks() if not b.lang]
    assert not bare, f"fenced blocks without a language (python, text, bash, ...): {bare}"


def test_every_no_test_marker_gives_a_reason() -> None:
    bad = []
    for path in example_files():
        text = path.read_text(encoding="utf-8")
        for match in _ANY_NO_TEST.finditer(text):
            after = text[match.end() + 1 :]
            if not _NO_TEST.match(match.group().strip()) or not after.startswith("```"):
                line = text.count("\n", 0, match.start()) + 1
                bad.append(f"{path.relative_to(ROOT)}:{line}: {match.group().strip()}")
    assert not bad, (
        "a no-test marker is a line `<!-- no-test: why it cannot run here -->` right before a "
        "fenced block:\n" + "\n".join(bad)
    )


def test_shell_blocks_are_marked() -> None:
    shell = [b for b in blocks() if b.lang in SHELLS]
    # The README's set-up commands: tests/test_readme.py checks CI runs them.
    shell = [b for b in shell if b.page != "README.md" or "pip install" not in b.code]
    unmarked = [f"{b.page}:{b.line}" for b in shell if b.no_test is None]
    assert not unmarked, f"shell blocks the tests do not run need a no-test marker: {unmarked}"


def relative_links() -> list[tuple[Path, str]]:
    links = []
    for path in example_files():
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # links in code are not links
        for target in _LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http:, https:, mailto:, or an anchor on the same page
            links.append((path, target))
    return links


def test_relative_links_point_at_files() -> None:
    broken = []
    for path, target in relative_links():
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_page_is_linked_from_somewhere() -> None:
    linked = {(path.parent / target.split("#", 1)[0]).resolve() for path, target in relative_links()}
    orphans = [p.relative_to(ROOT) for p in doc_files() if p.resolve() not in linked]
    assert not orphans, f"pages no other page links to: {orphans}"


def test_every_page_is_in_the_site_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s*- (?:[^:\n]*: )?(\S+\.md)\s*$", config, re.M))
    missing = [str(p.relative_to(DOCS)) for p in doc_files() if str(p.relative_to(DOCS)) not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


@pytest.mark.parametrize(
    "module", [dataloader, dataloader.transform], ids=["dataloader", "dataloader.transform"]
)
def test_public_names_are_sorted(module) -> None:
    assert list(module.__all__) == sorted(module.__all__)


@pytest.mark.parametrize(
    "module", [dataloader, dataloader.transform], ids=["dataloader", "dataloader.transform"]
)
def test_public_names_are_documented(module) -> None:
    api = "\n".join(p.read_text(encoding="utf-8") for p in sorted((DOCS / "api").glob("*.md")))
    missing = [name for name in module.__all__ if not re.search(rf"\b{re.escape(name)}\b", api)]
    assert not missing, f"{module.__name__} names missing from docs/api/: {missing}"


# -- every message in the troubleshooting page ---------------------------------------------

_PRINTF = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrifg%]")
# Raised for control flow, or re-raised objects whose text is built elsewhere.
_NOT_MESSAGES = {"StopIteration", "EOFError", "AttributeError", "NotImplementedError"}


def _literal_parts(node: ast.AST) -> list[str]:
    """The constant text of a message expression (f-string pieces, concatenations)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp):
        return _literal_parts(node.left) + _literal_parts(node.right)
    return []


def core_messages() -> list[tuple[str, str]]:
    """(where, the longest literal piece) of each message raised or warned outside vision/."""
    found = []
    for path in sorted((ROOT / "dataloader").rglob("*.py")):
        if "vision" in path.parts or "_cli" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                if ast.unparse(node.exc.func) not in _NOT_MESSAGES:
                    call = node.exc
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "logger.warning":
                call = node
            if call is None or not call.args:
                continue
            pieces = [
                piece.strip(" .;:")
                for part in _literal_parts(call.args[0])
                for piece in _PRINTF.split(part)  # logging's %d and %s are placeholders
            ]
            pieces = [p for p in pieces if len(p) >= 12]
            if pieces:
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.append((where, max(pieces, key=len)))
    return found


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "").replace("\\", ""))


def test_every_core_message_is_in_troubleshooting() -> None:
    page = _normalise((DOCS / "troubleshooting.md").read_text(encoding="utf-8"))
    missing = [
        f"{where}: {piece!r}" for where, piece in core_messages() if _normalise(piece) not in page
    ]
    assert not missing, "messages missing from docs/troubleshooting.md:\n" + "\n".join(missing)
