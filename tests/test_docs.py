"""The documentation cannot rot.

- Every fenced block in README.md and docs/**/*.md names its language. ```python blocks run,
  each on its own, as a user who copies one into a file runs it: as ``__main__``, in a fresh
  namespace and an empty directory of its own (tests/_doc_blocks.py; one interpreter per page
  keeps this fast), so a block may not use names or files an earlier block left behind; each
  should take well under 5 s. ```text
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
import importlib.util
import inspect
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


def page_blocks(page: str) -> list[tuple[Block, str, list[tuple[int, int]]]]:
    """Each runnable block of the page, with its code made to check its shown output, and
    (page line, outputs shown) of each of its output checks."""
    return [(b, *with_checks(b.code, b.line)) for b in python_blocks() if b.page == page]


def _block_file(block: Block) -> str:
    return f"block_{block.line}.py"


def _failures(stderr: str) -> list[str]:
    """page line: error, for each block the runner reports as failed (the traceback's last
    line in the block's own file gives the page line)."""
    found = []
    for report in stderr.split("BLOCK FAILED: ")[1:]:
        first = int(re.match(r"block_(\d+)\.py", report)[1])
        lines = re.findall(rf'File ".*?block_{first}\.py", line (\d+)', report)
        error = report.rstrip().rsplit("\n", 1)[-1]
        found.append(f"line {first + int(lines[-1]) - 1 if lines else first}: {error}")
    return found


_OPTIONAL_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?P<module>torch|ray|megengine|dataloader\.torch)\b", re.M)


def _missing_for(code: str) -> set[str]:
    """The optional frameworks the block imports that this environment lacks."""
    needed = {m["module"] for m in _OPTIONAL_IMPORT.finditer(code)}
    needed = {"torch" if name == "dataloader.torch" else name for name in needed}
    return {name for name in needed if importlib.util.find_spec(name) is None}


@pytest.mark.parametrize("page", pages_with_examples())
def test_examples_run(page: str, tmp_path: Path) -> None:
    blocks = page_blocks(page)
    # A block that imports an optional framework runs where it is installed (.ci/run installs
    # torch and ray for these pages); elsewhere it is left out, and a page of only such blocks skips.
    runnable = [entry for entry in blocks if not _missing_for(entry[1])]
    if not runnable:
        missing = sorted(set().union(*(_missing_for(code) for _, code, _ in blocks)))
        pytest.skip(f"{page}: every example imports {', '.join(missing)}, which is not installed")
    for block, code, _ in runnable:
        (tmp_path / _block_file(block)).write_text(code, encoding="utf-8")
    for helper in ("_doc_expect.py", "_doc_blocks.py"):  # the output checks, the block runner
        shutil.copy(Path(__file__).with_name(helper), tmp_path)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATALOADER_", "MGE_DATA_")) and key not in ("WORLD_SIZE", "RANK")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run(
        [sys.executable, "_doc_blocks.py", *(_block_file(block) for block, _, _ in runnable)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT * len(runnable),
    )
    assert result.returncode == 0, (
        f"{page}: examples that fail when run on their own (exit code {result.returncode}): "
        f"{_failures(result.stderr)}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    )
    ran_file = tmp_path / _doc_expect.RAN
    ran = Counter(int(n) for n in ran_file.read_text().split()) if ran_file.exists() else Counter()
    checked = [check for _, _, checks in runnable for check in checks]
    short = [f"line {line}: {ran[line]} of {times}" for line, times in checked if ran[line] < times]
    assert not short, f"{page}: output checks that ran fewer times than the outputs shown: {short}"


def test_there_are_examples() -> None:
    assert len(python_blocks()) >= 20
    assert "README.md" in pages_with_examples()


def test_output_is_checked_somewhere() -> None:
    checks = [c for page in pages_with_examples() for _, _, cs in page_blocks(page) for c in cs]
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


# -- DataLoader's docstring: help(DataLoader) explains every parameter ----------------------


def documented_parameters(docstring: str) -> list[str]:
    """The names a NumPy-style ``Parameters`` section of ``docstring`` gives entries to
    (``name``, ``name : type`` or ``a, b : type`` lines at the section's own indent)."""
    lines = inspect.cleandoc(docstring).splitlines()
    try:
        start = next(i for i, line in enumerate(lines[:-1]) if line == "Parameters" and set(lines[i + 1]) == {"-"})
    except StopIteration:
        return []
    names: list[str] = []
    for i, line in enumerate(lines[start + 2 :], start + 2):
        if i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"-"}:
            break  # the next section's heading
        if line and not line[0].isspace():
            names += [name.strip() for name in line.split(" : ", 1)[0].split(",")]
    return names


def test_every_loader_parameter_has_a_docstring_entry() -> None:
    parameters = [p for p in inspect.signature(dataloader.DataLoader.__init__).parameters if p != "self"]
    entries = documented_parameters(dataloader.DataLoader.__doc__ or "")
    missing = [p for p in parameters if p not in entries]
    assert not missing, f"DataLoader's docstring has no Parameters entry for {missing}"
    stale = [e for e in entries if e not in parameters]
    assert not stale, f"DataLoader's docstring documents parameters it does not take: {stale}"
    assert entries == parameters, "DataLoader's Parameters entries are not in the signature's order"


def test_every_loader_property_has_a_docstring() -> None:
    properties = {
        name: value
        for cls in dataloader.DataLoader.__mro__
        for name, value in vars(cls).items()
        if isinstance(value, property) and not name.startswith("_")
    }
    assert len(properties) >= 10
    bare = sorted(name for name, value in properties.items() if not (value.__doc__ or "").strip())
    assert not bare, f"DataLoader properties without a docstring: {bare}"


def test_parameter_entries_are_found() -> None:
    """The parser above finds entries, names that share one, and stops at the next section."""
    doc = """Summary.

    Parameters
    ----------
    first
        What it does.
    second, third : int
        Two at once.

    Returns
    -------
    nothing
        Not a parameter.
    """
    assert documented_parameters(doc) == ["first", "second", "third"]
    assert documented_parameters("Summary without sections.") == []


# -- each package's docstring is a map of its files ----------------------------------------

# Being reorganized by others; their maps are theirs to keep.
_UNMAPPED_PACKAGES = {"bench", "_cli"}


def mapped_packages() -> list[Path]:
    """Every package under dataloader/ whose ``__init__`` docstring maps its files."""
    package = ROOT / "dataloader"
    return sorted(
        init.parent
        for init in package.rglob("__init__.py")
        if init.parent != package and not _UNMAPPED_PACKAGES & set(init.relative_to(package).parts)
    )


@pytest.mark.parametrize(
    "package", mapped_packages(), ids=lambda p: str(p.relative_to(ROOT / "dataloader"))
)
def test_package_docstring_maps_its_files(package: Path) -> None:
    """Every module (``name.py``) and subpackage (``name/``) of a package is named in its
    ``__init__`` docstring, and every ``name.py`` the docstring names exists."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    files = [f"{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"]
    files += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()]
    unnamed = sorted(f for f in files if not re.search(rf"(?<![\w/]){re.escape(f)}", doc))
    assert not unnamed, f"{package.name}/__init__.py's docstring does not name {unnamed}"
    named = set(re.findall(r"(?<![\w/])([\w/]+\.py)\b", doc))
    missing = sorted(n for n in named if not (package / n).exists() and not (ROOT / "dataloader" / n).exists())
    assert not missing, f"{package.name}/__init__.py's docstring names files that do not exist: {missing}"
    heads = re.findall(r"^- ``([^`]+)``", doc, re.M)
    bare = [h for h in heads if not h.endswith((".py", "/"))]
    assert not bare, f"{package.name}/__init__.py's map names modules without `.py`, unchecked: {bare}"


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
