"""No import circles among the package's modules, imports inside functions included.

A circle (``a`` imports ``b`` and ``b``, maybe deep inside a function, imports ``a``) means
neither module can be read, tested or moved without the other. The modules are read as
text (nothing is imported); ``if TYPE_CHECKING:`` imports count too. Any circle fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"gpu_vecenv": "gpu_vecenv", "gpu_vecenv.envs": "envs",
            "gpu_vecenv.adapters": "adapters", "gpu_vecenv.cuda_src": "cuda_src"}


def _modules(root: Path, packages: dict[str, str]) -> dict[str, Path]:
    modules = {}
    for package, folder in packages.items():
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its text."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")[: None if path.name == "__init__.py" else -1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_circles(root: Path = ROOT, packages: dict[str, str] = PACKAGES) -> list[set[str]]:
    """The groups of modules that import each other (strongly connected, > 1 module)."""
    modules = _modules(root, packages)
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    reach = {}
    for start in graph:  # who start reaches (a few hundred modules: a search each is fine)
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        reach[start] = seen
    groups = []
    for name in sorted(graph):
        group = {name} | {other for other in reach[name] if name in reach[other]}
        if len(group) > 1 and group not in groups:
            groups.append(group)
    return groups


def test_no_import_circles():
    circles = [sorted(group) for group in import_circles()]
    assert not circles, f"import circles: {circles}"


def test_the_check_sees_a_circle_through_a_function_level_import(tmp_path):
    package = tmp_path / "gpu_vecenv"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from gpu_vecenv.b import f\n")
    (package / "b.py").write_text("def f():\n    from gpu_vecenv import a\n")
    (package / "c.py").write_text("from . import a\n")  # into the circle, not part of it
    assert import_circles(tmp_path, {"gpu_vecenv": "gpu_vecenv"}) == [
        {"gpu_vecenv.a", "gpu_vecenv.b"}]
