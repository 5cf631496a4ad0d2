"""Tables of an experiment's aggregate: `write_tables` writes one `<stem>.tex` per
table the experiment registers (`lipnorm.experiments`); `TABLES` is the registry's view,
experiment -> its table stems.

The builders, by experiment family: `accuracy` (depth, missing features, alpha,
classic), `diagnose`, `remedies`; the cells they share (`cells`); the two renderers of
their (text, bold) frames: `latex` (booktabs, the `.tex` files) and `markdown` (GitHub
pipe tables, which `lipnorm publish` writes into its `summary.md`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from lipnorm import experiments
from lipnorm.io import atomic_path
from lipnorm.results.aggregate import load_table
from lipnorm.results.tables.latex import render


def __getattr__(name: str):
    if name == "TABLES":  # experiment -> its table stems, as registered (lipnorm.experiments)
        return experiments.tables()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def write_tables(
    experiment: str, aggregate_dir: str | os.PathLike, out_dir: str | os.PathLike
) -> list[Path]:
    """Write `<out_dir>/<stem>.tex` for each table the experiment registers
    (`lipnorm.experiments`), built from the aggregate tables it names."""
    entry = experiments.experiment(experiment)
    load = functools.cache(functools.partial(load_table, aggregate_dir))
    written = []
    for output in entry.tables:
        path = Path(out_dir) / f"{output.stem}.tex"
        with atomic_path(path) as tmp:
            tmp.write_text(render(*experiments.build(output, load)))
        written.append(path)
    return written
