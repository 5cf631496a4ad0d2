"""The Lipschitz probe's figure (`lipnorm probe`'s estimates)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from lipnorm import registry
from lipnorm.results.aggregate import ordered
from lipnorm.results.figures.style import model_legend, panel_figure, paper_style, where


@paper_style
def lipschitz_probe(probe: pd.DataFrame) -> Figure:
    """Empirical Lipschitz estimate vs input scale (log-log) per model; one panel per
    kind of input."""
    kinds = sorted(probe["kind"].unique())
    models = ordered("model", probe["model"])
    fig, axes = panel_figure(1, len(kinds))
    for ax, kind in zip(axes[0], kinds):
        ax.set_xscale("log")
        ax.set_yscale("log")
        sns.lineplot(data=where(probe, {"kind": kind}), x="s", y="estimate", hue="model",
                     hue_order=models, palette=registry.figure_palette(models), errorbar="sd", marker="o", ax=ax,
                     legend=False)
        # A panel spanning about one decade would otherwise label every minor tick.
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{kind} inputs")
        ax.set_xlabel("Input scale $s$")
        ax.set_ylabel("Lipschitz estimate" if ax is axes[0, 0] else "")
    model_legend(fig, models, diverged=False)
    return fig
