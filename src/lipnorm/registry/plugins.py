"""Plugins: a Python file or an importable module that registers its own entries
(`lipnorm.registry.register_*`, `lipnorm.experiments.register_experiment`) when imported;
`lipnorm train --plugin`, the other commands' `--plugin` and the workflow's `plugins:`
load them (`load_plugins`) before anything reads the registry. lipnorm's own parts
are found the same way, as the modules of a package (`import_parts`:
`lipnorm.architectures`, `lipnorm.normalisations`, `lipnorm.datasets`,
`lipnorm.experiments`), each importing no torch at import, so that a new one is one
module and no list names it.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path
from typing import Any, Iterable

_LOADED_PLUGINS: dict[str, Any] = {}


def load_plugin(spec: str) -> Any:
    """Import a plugin: a Python file (a path, or a name ending in ``.py``) or an
    importable module, which registers entries when imported. Loading one twice is a
    no-op. A missing file or module, or one whose import raises, is a ValueError
    naming it and why."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"plugin must be a file path or a module name, got {spec!r}")
    as_path = Path(spec)
    is_file = _names_file(spec, Path.cwd())
    key = str(as_path.resolve()) if is_file else spec
    if key in _LOADED_PLUGINS:
        return _LOADED_PLUGINS[key]
    if is_file:
        if not as_path.is_file():
            raise ValueError(f"plugin file {spec!r} does not exist")
        module_name = f"lipnorm_plugin_{as_path.stem}_{len(_LOADED_PLUGINS)}"
        module_spec = importlib.util.spec_from_file_location(module_name, as_path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        where = f"plugin file {spec!r}"
        load = lambda: module_spec.loader.exec_module(module)  # noqa: E731
    else:
        where = f"plugin module {spec!r}"
        if importlib.util.find_spec(spec.split(".")[0]) is None:
            raise ValueError(f"{where} is neither a file nor an importable module")
        module = None
        load = lambda: importlib.import_module(spec)  # noqa: E731
    try:
        loaded = load()
    except Exception as err:
        if is_file:
            sys.modules.pop(module_name, None)
        raise ValueError(f"{where} failed to import: {type(err).__name__}: {err}") from err
    module = module if is_file else loaded
    _LOADED_PLUGINS[key] = module
    return module


def loaded_plugins() -> tuple[str, ...]:
    """The plugins loaded so far: each file's resolved path, or the module's name."""
    return tuple(_LOADED_PLUGINS)


def _names_file(spec: str, folder: Path) -> bool:
    """Whether `spec` is a file path (not a module name), read from `folder`."""
    return spec.endswith(".py") or "/" in spec or (folder / spec).is_file()


def plugins_relative_to(specs: Iterable[str] | None, folder: str | Path) -> list[str]:
    """`specs` with each relative file path read from `folder` (the workflow config's
    own folder), made absolute; module names and absolute paths unchanged."""
    folder = Path(folder)
    return [
        str((folder / spec).resolve())
        if isinstance(spec, str) and spec.strip() and _names_file(spec, folder) and not Path(spec).is_absolute()
        else spec
        for spec in specs or ()
    ]


def load_plugins(specs: Iterable[str] | None) -> list[Any]:
    """`load_plugin` of each, in order."""
    return [load_plugin(spec) for spec in specs or ()]


def import_parts(package: str) -> tuple[str, ...]:
    """Import `package` (by name) and every module in it, each of which registers its
    part(s) when imported; return the modules' names in the order imported. The package's
    `ORDER` (module names, optional) comes first, in that order, then every other module
    (a name not starting with ``_``) by name: a new built-in part is a module dropped
    into the package, listed nowhere. A module imported already is not run again."""
    found = importlib.import_module(package)
    present = sorted(
        info.name for info in pkgutil.iter_modules(found.__path__) if not info.name.startswith("_")
    )
    first = tuple(getattr(found, "ORDER", ()))
    missing = [name for name in first if name not in present]
    if missing:
        raise ValueError(f"{package}.ORDER names module(s) {', '.join(missing)} that the package does not hold")
    ordered = (*first, *(name for name in present if name not in first))
    for name in ordered:
        importlib.import_module(f"{package}.{name}")
    return tuple(f"{package}.{name}" for name in ordered)
