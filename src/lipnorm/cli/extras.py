"""Which optional extra a missing module comes from: a slim install's commands name the
extra to install."""

from __future__ import annotations

import re


def extra_modules() -> dict[str, str]:
    """The top-level module of each optional dependency, with its extra's name.

    Read from the installed distribution's metadata (pyproject.toml's
    `optional-dependencies`), so the extras have one source; empty when lipnorm is
    not installed. A distribution `a-b` is taken to install module `a_b`.
    """
    from importlib.metadata import PackageNotFoundError, requires

    try:
        requirements = requires("lipnorm") or []
    except PackageNotFoundError:
        return {}
    modules = {}
    for requirement in requirements:
        extra = re.search(r"""extra\s*==\s*["']([^"']+)""", requirement)
        name = re.match(r"[A-Za-z0-9._-]+", requirement).group()
        if extra and name.lower() != "lipnorm":
            modules.setdefault(name.lower().replace("-", "_").replace(".", "_"), extra.group(1))
    return modules


def missing_extra(err: ImportError) -> tuple[str, str] | None:
    """(module, extra) when `err`, or an import error it was raised from, is an
    optional dependency that is not installed; None for any other import error."""
    extras = extra_modules()
    while err is not None:
        if isinstance(err, ModuleNotFoundError) and err.name:
            module = err.name.split(".")[0].lower()
            if module in extras:
                return module, extras[module]
        err = err.__cause__ or err.__context__
    return None
