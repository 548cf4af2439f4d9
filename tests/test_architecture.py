"""The layering docs/architecture.md describes, enforced: who may import whom, and file sizes.

proto/             imports nothing of Seedcast's other folders (it is the shared contract)
evaluators/        imports only proto/
inference_server/  never imports optimizer/
optimizer/         imports of inference_server/ only its noise package, model_source and
                   serve_config (how to start a server: local fleets write one); the CLI alone
                   imports the server too, to run `seedcast serve`
api/               the package root (`import seedcast`): the public API on top of all of them, which
                   none of them imports except the CLI's commands
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("proto", "evaluators", "inference_server", "optimizer", "api")
GENERATED = {"seedcast_pb2.py", "seedcast_pb2_grpc.py"}
MAX_LINES = 400
OPTIMIZER_MAY_USE = (
    "seedcast.inference_server.noise",
    "seedcast.inference_server.model_source",
    "seedcast.inference_server.serve_config",
)
CLI_MAY_ALSO_USE = ("seedcast.inference_server.server",)


def _sources(folder: str) -> list[Path]:
    return sorted(p for p in (REPO_ROOT / folder).rglob("*.py") if p.name not in GENERATED)


def _is_seedcast(module: str) -> bool:
    return module == "seedcast" or module.startswith("seedcast.")


def _imports(path: Path) -> list[str]:
    """Every module a file imports from Seedcast, at any depth (lazy imports inside functions count)."""
    modules = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and _is_seedcast(node.module):
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names if _is_seedcast(alias.name))
    return modules


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


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


API_MODULES = ("seedcast.runs", "seedcast.servers")


def _is_api(module: str) -> bool:
    return module == "seedcast" or _within(module, API_MODULES)  # `seedcast` alone is the root, api/__init__


@pytest.mark.parametrize("folder", ["proto", "evaluators", "inference_server"])
def test_nothing_below_the_api_imports_it(folder):
    assert _violations(folder, lambda path, module: not _is_api(module)) == []


def test_the_optimizer_reaches_the_api_only_from_the_cli_commands():
    commands = REPO_ROOT / "optimizer" / "commands.py"
    assert _violations("optimizer", lambda path, module: path == commands or not _is_api(module)) == []


def test_the_server_never_imports_the_optimizer():
    assert _violations("inference_server", lambda path, module: not _within(module, ("seedcast.optimizer",))) == []


def test_the_optimizer_uses_only_the_servers_noise_and_model_source():
    def allowed(path: Path, module: str) -> bool:
        if not _within(module, ("seedcast.inference_server",)):
            return True
        extra = CLI_MAY_ALSO_USE if path == REPO_ROOT / "optimizer" / "cli.py" else ()
        return _within(module, OPTIMIZER_MAY_USE + extra)

    assert _violations("optimizer", allowed) == []


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    rogue = tmp_path / "optimizer" / "rogue.py"
    rogue.parent.mkdir()
    rogue.write_text("def f():\n    from seedcast.inference_server.servicer import InferenceServicer\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert _violations("optimizer", lambda path, module: _within(module, OPTIMIZER_MAY_USE)) == [
        "optimizer/rogue.py imports seedcast.inference_server.servicer"
    ]


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
        "seedcast." + ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for folder in FOLDERS
        if folder != "api"
        for init in (REPO_ROOT / folder).rglob("__init__.py")
    }
    assert (REPO_ROOT / "api" / "__init__.py").is_file() and not list((REPO_ROOT / "api").glob("*/__init__.py"))
    assert found | {"seedcast"} == listed  # api/ is the root package itself, with no sub-packages
