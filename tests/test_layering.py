"""The package's layering rule, held by a test so that it cannot erode silently.

Imports point down the layers that docs/design/pipeline.md lists (a module
may import its own layer and those below it), no module imports another
module's underscore names, and the benchmarks use the public API only.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dataloader"

# Bottom to top; each entry is a top-level module or package of dataloader/.
LAYERS = [
    {"errors", "_validate", "_alloc", "_trace", "_failure", "_failure_book", "_local", "_digest",
     "_order_state", "_framework_hint", "_gil", "_image_codec"},
    {"dataset", "sampler", "collator", "transform", "rng", "worker", "memory", "monitor",
     "image_folder", "callable_source", "columnar", "mixing", "packing", "pad_collator", "_shares", "bucket_sampler", "_bucket_plan", "_remote", "_options",
     "hooks", "argtypes", "_world", "_index_batches", "_sampler_checks", "_reshard", "rank_states"},
    {"_stages", "_transport", "raydata", "_tune"},
    {"_workers", "_device"},
    {"_exec"},
    {"loader", "buffer", "__init__", "__main__", "_cli", "torch"},
]
# The lab beside the package (not installed): it may import `dataloader` and its public
# modules, nothing private.
BENCHMARKS = PACKAGE.parent / "benchmarks"


def _layer(unit: str) -> int:
    for level, units in enumerate(LAYERS):
        if unit in units:
            return level
    raise AssertionError(
        f"dataloader/{unit} is in no layer: add it to LAYERS here and to the list in "
        "docs/design/pipeline.md"
    )


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found.append((".".join(("dataloader",) + parts), path))
    return found


def _imports(name: str, source: str, is_package: bool = False) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import of dataloader code."""
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names if alias.name.startswith("dataloader")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                target = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("dataloader"):
                found.append((target, [alias.name for alias in node.names], node.lineno))
    return found


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(module: str, name: str) -> bool:
    base = PACKAGE.parent.joinpath(*module.split("."), name)
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _upward_imports(name: str, source: str, is_package: bool = False) -> list[str]:
    unit, level = _unit(name), _layer(_unit(name))
    return [
        f"line {line}: {unit} (layer {level}) imports {target} (layer {_layer(_unit(target))})"
        for target, _, line in _imports(name, source, is_package)
        if _unit(target) != unit and target != "dataloader" and _layer(_unit(target)) > level
    ]


def _private_names(name: str, source: str, is_package: bool = False) -> list[str]:
    return [
        f"line {line}: {', '.join(private)} from {target}"
        for target, names, line in _imports(name, source, is_package)
        for private in [[n for n in names if n.startswith("_") and not _is_module(target, n)]]
        if private
    ]


def _private_modules(name: str, source: str, is_package: bool = False) -> list[str]:
    return [
        f"line {line}: {target}"
        for target, _, line in _imports(name, source, is_package)
        if any(p.startswith("_") for p in target.split(".")[1:])
    ]


MODULES = _modules()
IDS = [name for name, _ in MODULES]


def test_the_layers_cover_the_package():
    for name, _ in MODULES:
        _layer(_unit(name))


@pytest.mark.parametrize("name,path", MODULES, ids=IDS)
def test_imports_point_down_the_layers(name, path):
    upward = _upward_imports(name, path.read_text(), path.name == "__init__.py")
    assert not upward, f"{path}: imports must point down the layers: {upward}"


@pytest.mark.parametrize("name,path", MODULES, ids=IDS)
def test_no_module_imports_another_modules_private_names(name, path):
    private = _private_names(name, path.read_text(), path.name == "__init__.py")
    assert not private, (
        f"{path}: imports private names {private}; give them a public name in a private "
        "module, or call them through that module's public functions"
    )


BENCH = [(f"benchmarks.{path.stem}", path) for path in sorted(BENCHMARKS.glob("*.py"))]


def test_the_benchmarks_are_found():
    assert len(BENCH) > 8 and not (PACKAGE / "bench").exists()


@pytest.mark.parametrize("name,path", BENCH, ids=[name for name, _ in BENCH])
def test_the_benchmarks_use_the_public_api_only(name, path):
    source = path.read_text()
    hidden = _private_modules(name, source) + _private_names(name, source)
    assert not hidden, f"{path}: the benchmarks import private modules or names: {hidden}"


def test_the_checks_catch_what_they_forbid():
    """The rules above flag a module that breaks them: they are not vacuous."""
    probe = "from .._exec.pipeline import Pipeline\nfrom ..rng import _using\n"
    assert len(_upward_imports("dataloader._stages.probe", probe)) == 1
    assert _private_names("dataloader._stages.probe", probe) == ["line 2: _using from dataloader.rng"]
    assert _private_names("dataloader.collator", "from . import _alloc\n") == []
    absolute = "from dataloader._exec.pipeline import Pipeline\nfrom dataloader import DataLoader\n"
    assert _private_modules("benchmarks.probe", absolute) == ["line 1: dataloader._exec.pipeline"]
