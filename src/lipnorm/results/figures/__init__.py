"""Figures of an experiment's aggregate, as `<stem>.pdf` and `<stem>.png`:
`write_figures` draws each figure the experiment registers (`lipnorm.experiments`);
`FIGURES` is the registry's view, experiment -> its figure stems.

Sized for a two-column paper (one column is `style.COLUMN_WIDTH` inches, fonts 7-8 pt); one
colour per model in every figure (`lipnorm.registry.model_colour`, or a spare where two
models of a figure would share one: `figure_palette`; `PALETTE` is every model's own,
computed on access so that a plugin's models have theirs). Bands are mean ± sample std over seeds
(seaborn's `errorbar="sd"`); on a log axis seaborn takes them in log space, i.e.
geometric mean and std. A setting in which any seed diverged is not drawn as a point
(its mean would average only the survivors) but as a × on the panel's lower edge
(in the layer-statistics figures, which have no setting axis, it is named in a footnote).

The figures, by experiment family: `accuracy` (depth, alpha, transformer), `training`
(gradients and training curves), `probe` (the Lipschitz probe), `layerstats`
(diagnose), `remedies`; the paper style and the helpers they share: `style`.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from lipnorm import experiments, registry
from lipnorm.results.aggregate import load_table
from lipnorm.results.figures.style import save_figure


def __getattr__(name: str):
    if name == "PALETTE":
        return registry.palette("model")
    if name == "FIGURES":  # experiment -> its figure stems, as registered (lipnorm.experiments)
        return experiments.figures()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def write_figures(
    experiment: str, aggregate_dir: str | os.PathLike, out_dir: str | os.PathLike
) -> list[Path]:
    """Write the PDF and PNG of each figure the experiment registers
    (`lipnorm.experiments`), drawn from the aggregate tables it names."""
    entry = experiments.experiment(experiment)
    load = functools.cache(functools.partial(load_table, aggregate_dir))
    written = []
    for output in entry.figures:
        written += save_figure(experiments.build(output, load), Path(out_dir) / output.stem)
    return written
