"""Aggregation of run directories into tidy tables, and the per-seed statistics that
tables and figures share.

`lipnorm aggregate` reads the files `lipnorm train` writes into each run directory
(see docs/architecture.md) and writes one table per kind of record, every row carrying
its run's settings (each `config` key is a column) and `status`:

- `runs`: one row per run (settings, status, and the summary's outcomes);
- `epochs`: per-epoch metrics (`metrics.parquet`; its `lr` becomes `epoch_lr`, since a
  record column named like a setting gets the prefix `epoch_`);
- `gradnorms`: per-layer gradient norms (`gradnorms.parquet`);
- `outnorms`: per-layer attention output norms (`outnorms.parquet`);
- `layerstats`: per-layer representation diagnostics (`layerstats.parquet`: `epoch,
  layer, metric, value`, see `lipnorm.train.diagnostics`).

The model's axes `architecture`, `attention_norm` and `norm` (and `residual`) are
settings of every run `lipnorm train` writes, hence setting columns of every table.

Names are printed and ordered as `lipnorm.registry` registers them (`label`, `ordered`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from lipnorm import experiments, registry
from lipnorm.io import atomic_path, write_parquet


def __getattr__(name: str):
    if name == "EXPERIMENTS":  # the registered experiments' names (lipnorm.experiments)
        return experiments.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SUMMARY_FILE = "summary.json"
# Aggregate table name -> the run-directory file it gathers.
PER_EPOCH_FILES = {
    "epochs": "metrics.parquet",
    "gradnorms": "gradnorms.parquet",
    "outnorms": "outnorms.parquet",
    "layerstats": "layerstats.parquet",
}
AGGREGATE_TABLES = ("runs", *PER_EPOCH_FILES)
RUN_STATUSES = ("ok", "diverged")

def label(kind: str, name: str) -> str:
    """The printed name of a value of `kind`: "model", "dataset", "architecture",
    "attention_norm" or "norm" (`lipnorm.registry.label`)."""
    known = registry.names(kind)
    if name not in known:
        raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(known)}")
    return registry.label(kind, name)


def ordered(kind: str, names: Iterable[str]) -> list[str]:
    """The distinct `names` in the registry's order (that of rows and legends)."""
    distinct = set(names)
    for name in distinct:
        label(kind, name)
    return [name for name in registry.names(kind) if name in distinct]


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    """Nested dicts become `outer_inner` columns; lists become JSON text."""
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}_{key}" if prefix else key, out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = json.dumps(value)
    else:
        out[prefix] = value


def check_run_dirs(run_dirs: Sequence[str | os.PathLike]) -> None:
    """Raise one ValueError naming every run directory that lacks a file."""
    if not run_dirs:
        raise ValueError("no run directories given")
    problems = []
    for run_dir in run_dirs:
        missing = [
            name
            for name in (SUMMARY_FILE, *PER_EPOCH_FILES.values())
            if not (Path(run_dir) / name).is_file()
        ]
        if missing:
            problems.append(f"{run_dir} (missing {', '.join(missing)})")
    if problems:
        raise ValueError(
            f"{len(problems)} run director{'y is' if len(problems) == 1 else 'ies are'} "
            f"missing or unfinished (summary.json is written last): " + "; ".join(problems)
        )


def read_run_list(path: str | os.PathLike) -> list[str]:
    """The run directories listed in `path`, one per line (blank lines skipped).

    A grid's run directories can exceed what one command line holds (Linux: 128 KiB per
    argument, and a shell command is one argument), so the workflow passes them this way.
    Relative paths are relative to the working directory, not to the file.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"run list {str(path)!r} does not exist")
    run_dirs = [line for line in path.read_text().splitlines() if line.strip()]
    if not run_dirs:
        raise ValueError(f"run list {str(path)!r} lists no run directories (one per line)")
    return run_dirs


def write_run_list(path: str | os.PathLike, run_dirs: Sequence[str | os.PathLike]) -> Path:
    """Write `run_dirs` to `path`, one per line, atomically (what `read_run_list` reads)."""
    lines = [str(run_dir) for run_dir in run_dirs]
    for line in lines:
        if "\n" in line or not line.strip():
            raise ValueError(f"run directory {line!r} cannot be listed one per line")
    with atomic_path(path) as tmp:
        tmp.write_text("".join(f"{line}\n" for line in lines))
    return Path(path)


def read_run(run_dir: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's settings (flattened `config`) and its summary row (settings, status,
    outcomes). Summary fields named like a setting (e.g. `threads`) get a `run_` prefix."""
    summary = json.loads((Path(run_dir) / SUMMARY_FILE).read_text())
    status = summary.get("status")
    if status not in RUN_STATUSES:
        raise ValueError(
            f"{run_dir}: summary.json status {status!r}; allowed: {', '.join(RUN_STATUSES)}"
        )
    settings: dict[str, Any] = {}
    _flatten(summary["config"], "", settings)
    outcomes: dict[str, Any] = {}
    _flatten({k: v for k, v in summary.items() if k != "config"}, "", outcomes)
    row = dict(settings)
    for key, value in outcomes.items():
        row[f"run_{key}" if key in settings else key] = value
    row["run_dir"] = str(run_dir)
    return settings, row


def _check_unique_settings(settings_by_dir: dict[str, dict[str, Any]]) -> None:
    seen: dict[str, str] = {}
    for run_dir, settings in settings_by_dir.items():
        key = json.dumps(settings, sort_keys=True, default=str)
        if key in seen:
            raise ValueError(
                f"run directories {seen[key]} and {run_dir} have identical settings; "
                "a repeated run would be counted twice in the seed statistics"
            )
        seen[key] = run_dir


def aggregate_runs(run_dirs: Sequence[str | os.PathLike]) -> dict[str, pd.DataFrame]:
    """All runs' records as the tables named in AGGREGATE_TABLES.

    The `runs` frame lists its setting columns in `attrs["settings"]` (kept by parquet).
    """
    check_run_dirs(run_dirs)
    settings_by_dir: dict[str, dict[str, Any]] = {}
    rows = []
    for run_dir in run_dirs:
        settings, row = read_run(run_dir)
        settings_by_dir[str(run_dir)] = settings
        rows.append(row)
    _check_unique_settings(settings_by_dir)
    runs = pd.DataFrame(rows)
    setting_names = list(dict.fromkeys(k for s in settings_by_dir.values() for k in s))
    runs.attrs["settings"] = setting_names

    tables = {"runs": runs}
    keys = runs[[*setting_names, "status", "run_dir"]]
    for name, filename in PER_EPOCH_FILES.items():
        records = pd.concat(
            [pq.read_table(Path(run_dir) / filename).to_pandas() for run_dir in runs["run_dir"]],
            keys=list(runs["run_dir"]), names=["run_dir", None],
        )
        # A per-epoch column named like a setting (metrics' `lr`) is the epoch's value.
        records = records.rename(columns={c: f"epoch_{c}" for c in records if c in keys})
        records = records.reset_index(level="run_dir").reset_index(drop=True)
        tables[name] = keys.merge(records, on="run_dir", how="inner", validate="one_to_many")
        tables[name].attrs["settings"] = setting_names
    return tables


def write_aggregate(
    run_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike
) -> list[Path]:
    """Write `<out_dir>/<table>.parquet` and `.csv` for every aggregate table."""
    tables = aggregate_runs(run_dirs)
    out_dir = Path(out_dir)
    written = []
    for name, frame in tables.items():
        write_parquet(out_dir / f"{name}.parquet", frame)
        with atomic_path(out_dir / f"{name}.csv") as tmp:
            frame.to_csv(tmp, index=False)
        written += [out_dir / f"{name}.parquet", out_dir / f"{name}.csv"]
    return written


def load_table(aggregate_dir: str | os.PathLike, name: str) -> pd.DataFrame:
    """Read `<aggregate_dir>/<name>.parquet`, naming the command that writes it if absent."""
    path = Path(aggregate_dir) / f"{name}.parquet"
    if not path.is_file():
        writer = "lipnorm probe" if name == "probe" else "lipnorm aggregate"
        raise ValueError(f"{path} does not exist; `{writer} --out-dir {aggregate_dir}` writes it")
    return pd.read_parquet(path)


def settings_columns(runs: pd.DataFrame) -> list[str]:
    """The setting columns of a `runs` table (recorded by `aggregate_runs`)."""
    if "settings" not in runs.attrs:
        raise ValueError("this runs table has no settings list; write it with `lipnorm aggregate`")
    return [c for c in runs.attrs["settings"] if c in runs.columns]


def _check_one_run_per_seed(runs: pd.DataFrame, by: list[str]) -> None:
    """A cell holds the seeds of one setting: two runs with the same seed in one cell
    differ in a setting the grouping ignores, and averaging them would mix settings.
    (Settings that follow the seed, like a mask file's path, are fine.)"""
    repeated = runs[runs.duplicated([*by, "seed"], keep=False)]
    if repeated.empty:
        return
    key = repeated.iloc[0][[*by, "seed"]]
    clash = repeated[(repeated[[*by, "seed"]] == key).all(axis=1)]
    differ = [c for c in settings_columns(runs) if clash[c].nunique(dropna=False) > 1]
    raise ValueError(
        f"runs {', '.join(clash['run_dir'])} share {', '.join(f'{k}={v}' for k, v in key.items())} "
        f"but differ in {', '.join(differ)}; select one value of these before grouping by "
        f"{', '.join(by)}"
    )


def seed_cells(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per-cell statistics of the test metric (×100) over seeds.

    Columns: `by`, `n` (runs), `n_diverged`, `valid` (no run diverged), `mean` and
    `std` (sample std, ddof=1; NaN when n = 1). A cell with a diverged run is not
    valid and has no mean: averaging only the survivors would flatter the setting.
    """
    _check_one_run_per_seed(runs, by)
    rows = []
    for key, group in runs.groupby(by, sort=True, dropna=False):
        diverged = int((group["status"] == "diverged").sum())
        scores = group["test_metric"].to_numpy(dtype=float) * 100.0
        valid = diverged == 0
        rows.append(
            {
                **dict(zip(by, key)),
                "n": len(group),
                "n_diverged": diverged,
                "valid": valid,
                "mean": scores.mean() if valid else np.nan,
                "std": scores.std(ddof=1) if valid and len(scores) > 1 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=[*by, "n", "n_diverged", "valid", "mean", "std"])


def runs_of_valid_cells(runs: pd.DataFrame, by: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split into the runs of cells without divergence and the cells with divergence."""
    cells = seed_cells(runs, by)
    valid_keys = cells.loc[cells["valid"], by]
    kept = runs.merge(valid_keys, on=by, how="inner")
    kept.attrs = runs.attrs
    return kept, cells.loc[~cells["valid"]].reset_index(drop=True)
