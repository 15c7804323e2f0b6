"""The documentation cannot rot.

- Every ```python block in docs/**/*.md runs. The blocks of one page run in order, as one
  script in a fresh interpreter (a block may use names an earlier block of its page defined);
  each should take well under 5 s. A block preceded by a ``<!-- no-test -->`` line is only
  shown, not run (it needs a GPU, a framework that is not installed, or names defined elsewhere).
- Every relative link in docs/**/*.md and README.md points at a file that exists.
- Every public name of ``dataloader`` and ``dataloader.transform`` appears in docs/api/.
- Every error message and warning the core raises appears in docs/troubleshooting.md.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dataloader
import dataloader.transform

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NO_TEST = "<!-- no-test -->"
# Per block: examples are meant to take well under 5 s; the bound leaves room for a loaded CI.
EXAMPLE_TIMEOUT = 60

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def doc_files() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def python_blocks() -> list[tuple[str, int, str]]:
    """(page, line, code) of every runnable ```python block, in page order."""
    blocks = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            if before == NO_TEST:
                continue
            line = text.count("\n", 0, match.start()) + 2  # the block's first line of code
            blocks.append((str(path.relative_to(ROOT)), line, match.group(1)))
    return blocks


def pages_with_examples() -> list[str]:
    return sorted({page for page, _, _ in python_blocks()})


def page_script(page: str) -> tuple[str, list[tuple[int, int]]]:
    """The page's blocks as one script (a block may use names an earlier one defined),
    and (script line, page line) where each block starts."""
    parts, starts, script_line = [], [], 1
    for where, line, code in python_blocks():
        if where != page:
            continue
        starts.append((script_line, line))
        parts.append(code)
        script_line += code.count("\n")
    return "".join(parts), starts


def _page_line(starts: list[tuple[int, int]], script_line: int) -> int:
    """The page line of a script line."""
    first, line = max((s for s in starts if s[0] <= script_line), default=(1, 1))
    return line + script_line - first


@pytest.mark.parametrize("page", pages_with_examples())
def test_examples_run(page: str, tmp_path: Path) -> None:
    code, starts = page_script(page)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
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


def test_there_are_examples() -> None:
    assert len(python_blocks()) >= 20


def relative_links() -> list[tuple[Path, str]]:
    links = []
    for path in [*doc_files(), ROOT / "README.md"]:
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
