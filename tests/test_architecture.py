"""The layering docs/architecture.md describes, enforced: who may import whom, no cycles, file sizes.

proto/             the shared contract: imports nothing else of Seedcast
evaluators/        imports only proto/
inference_server/  imports proto/ and evaluators/; never the optimizer, the studies or the top layer
optimizer/         the training path: of inference_server/ only its noise package, model_source and
                   serve_config (how to start a server: local fleets write one); never studies/ or the top
studies/           the research harness (eval, compare, claims, GRPO): anything below the top layer
api/               the top layer, the package root (`import seedcast`): the Python API and the CLI, which
                   nothing below imports
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("proto", "evaluators", "inference_server", "optimizer", "studies", "api")
PACKAGE_OF_FOLDER = {"api": "seedcast", **{folder: f"seedcast.{folder}" for folder in FOLDERS if folder != "api"}}
# Folders that ship in the wheel beside the code (`--config NAME`, the examples the docs run).
SHIPPED_FOLDERS = ("configs", "examples")
GENERATED = {"seedcast_pb2.py", "seedcast_pb2_grpc.py"}
MAX_LINES = 400
OPTIMIZER_MAY_USE = (
    "seedcast.inference_server.noise",
    "seedcast.inference_server.model_source",
    "seedcast.inference_server.serve_config",
    # The entry point of a server in a Ray actor: what fleet.launcher=ray starts, as `python -m
    # seedcast.inference_server` is what fleet.local processes run.
    "seedcast.inference_server.ray_actor",
)
TOP_LAYER = ("seedcast.runs", "seedcast.servers", "seedcast.cli", "seedcast.commands")


def _sources(folder: str) -> list[Path]:
    return sorted(p for p in (REPO_ROOT / folder).rglob("*.py") if p.name not in GENERATED)


def _is_seedcast(module: str) -> bool:
    return module == "seedcast" or module.startswith("seedcast.")


def _imports(path: Path, module_level_only: bool = False) -> list[str]:
    """Every module a file imports from Seedcast, at any depth (lazy imports inside functions count), or only
    those that run when the module loads."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if module_level_only else ast.walk(tree)
    modules = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and _is_seedcast(node.module):
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names if _is_seedcast(alias.name))
    return modules


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _is_top_layer(module: str) -> bool:
    return module == "seedcast" or _within(module, TOP_LAYER)  # `seedcast` alone is the root, api/__init__


def _violations(folder: str, allowed) -> list[str]:
    return [
        f"{path.relative_to(REPO_ROOT)} imports {module}"
        for path in _sources(folder)
        for module in _imports(path)
        if not allowed(path, module)
    ]


def test_proto_imports_only_itself():
    assert _violations("proto", lambda path, module: _within(module, ("seedcast.proto",))) == []


def test_evaluators_import_only_proto():
    allowed = ("seedcast.proto", "seedcast.evaluators")
    assert _violations("evaluators", lambda path, module: _within(module, allowed)) == []


@pytest.mark.parametrize("folder", ["proto", "evaluators", "inference_server", "optimizer", "studies"])
def test_nothing_below_the_top_layer_imports_it(folder):
    assert _violations(folder, lambda path, module: not _is_top_layer(module)) == []


@pytest.mark.parametrize("folder", ["proto", "evaluators", "inference_server", "optimizer"])
def test_the_training_and_serving_paths_never_import_the_studies(folder):
    assert _violations(folder, lambda path, module: not _within(module, ("seedcast.studies",))) == []


def test_the_server_never_imports_the_optimizer():
    assert _violations("inference_server", lambda path, module: not _within(module, ("seedcast.optimizer",))) == []


def test_the_optimizer_uses_only_the_servers_noise_model_source_and_serve_config():
    def allowed(path: Path, module: str) -> bool:
        return not _within(module, ("seedcast.inference_server",)) or _within(module, OPTIMIZER_MAY_USE)

    assert _violations("optimizer", allowed) == []


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    rogue = tmp_path / "optimizer" / "rogue.py"
    rogue.parent.mkdir()
    rogue.write_text("def f():\n    from seedcast.inference_server.servicer import InferenceServicer\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert _violations("optimizer", lambda path, module: _within(module, OPTIMIZER_MAY_USE)) == [
        "optimizer/rogue.py imports seedcast.inference_server.servicer"
    ]


def _module_name(path: Path) -> str:
    folder, *rest = path.relative_to(REPO_ROOT).with_suffix("").parts
    parts = [PACKAGE_OF_FOLDER[folder], *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the Seedcast modules it imports when it loads (lazy imports break cycles on purpose)."""
    paths = {_module_name(path): path for folder in FOLDERS for path in _sources(folder)}
    graph = {}
    for module, path in paths.items():
        targets = set()
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ImportFrom) and node.module and _is_seedcast(node.module):
                # `from x import y` names a module x.y, or a name defined in x.
                targets.update(
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module for a in node.names
                )
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if _is_seedcast(alias.name))
        graph[module] = {target for target in targets if target in paths and target != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, once each (a depth-first search that reports each back edge's loop)."""
    cycles, state = [], {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_no_import_cycle_inside_the_package():
    graph = _import_graph()
    assert "seedcast.optimizer.config" in graph["seedcast.optimizer.config_files"]  # the graph sees real imports
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize("folder", [*FOLDERS, "tests", "bench", "deploy"])
def test_no_source_file_exceeds_the_size_a_reader_takes_in_one_sitting(folder):
    long = {
        str(p.relative_to(REPO_ROOT)): n for p in _sources(folder) if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these files (over {MAX_LINES} lines): {long}"


def test_every_package_folder_is_installed():
    # An editable install finds sub-packages by path; a wheel ships only those pyproject.toml lists.
    listed = set(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        _module_name(init)
        for folder in FOLDERS
        if folder != "api"
        for init in (REPO_ROOT / folder).rglob("__init__.py")
    }
    assert (REPO_ROOT / "api" / "__init__.py").is_file() and not list((REPO_ROOT / "api").glob("*/__init__.py"))
    shipped = {f"seedcast.{folder}" for folder in SHIPPED_FOLDERS if (REPO_ROOT / folder / "__init__.py").is_file()}
    assert shipped == {f"seedcast.{folder}" for folder in SHIPPED_FOLDERS}, "configs/ and examples/ need __init__.py"
    assert found | shipped | {"seedcast"} == listed  # api/ is the root package itself, with no sub-packages


def _string_literals(path: Path) -> list[str]:
    """The string values of every `Literal[...]` in a source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal":
            for value in ast.walk(node.slice):
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.append(value.value)
    return found


def test_no_setting_lists_its_choices_by_hand():
    # Allowed values come from the registries (proto/choices.one_of; tests/optimizer/test_config_registries.py
    # adds an entry and sees the configs accept it). "auto" is the one value a setting adds of its own.
    hand_written = {
        str(path.relative_to(REPO_ROOT)): values
        for folder in FOLDERS
        for path in _sources(folder)
        if (values := [v for v in _string_literals(path) if v != "auto"])
    }
    assert hand_written == {}


def test_the_choices_check_sees_a_hand_written_list(tmp_path):
    rogue = tmp_path / "rogue.py"
    rogue.write_text("from typing import Literal\nshaping: Literal['zscore', 'centered_ranks'] = 'zscore'\n")
    assert _string_literals(rogue) == ["zscore", "centered_ranks"]
