"""The architecture page's map holds: every import inside `lipnorm` goes down a floor
(or stays inside its own package), read from the code's import statements, function
bodies included, against the floors as docs/architecture.md lists them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "lipnorm"


def floors() -> dict[str, int]:
    """Each top-level module or package of lipnorm and its floor, from the map's table."""
    text = (REPO / "docs" / "architecture.md").read_text()
    found = {}
    for floor, name in re.findall(r"^\| (\d) \| `([\w.]+?)(?:/|\.py)?`", text, flags=re.MULTILINE):
        found[name] = int(floor)
    return found


def unit(module: str) -> str:
    """The top-level part of a dotted name inside lipnorm (`lipnorm.nn.conv` -> `nn`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, lipnorm module) of every import statement in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("lipnorm.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "lipnorm":
                found += [(node.lineno, f"lipnorm.{alias.name}") for alias in node.names
                          if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file()]
            elif node.module.startswith("lipnorm."):
                found.append((node.lineno, node.module))
    return found


def test_every_module_is_on_the_map():
    mapped = floors()
    units = {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()
             if (path.suffix == ".py" or (path / "__init__.py").is_file())}
    assert units - set(mapped) == set(), "add these to docs/architecture.md's map"


def test_imports_only_go_down():
    mapped = floors()
    climbing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        own = relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 or relative.stem != "__init__" else "__init__"
        for line, module in imports(path):
            target = unit(module)
            if target != own and mapped[target] >= mapped[own]:
                climbing.append(f"{relative}:{line} imports {module} (floor {mapped[target]}) from floor {mapped[own]}")
    assert climbing == []
