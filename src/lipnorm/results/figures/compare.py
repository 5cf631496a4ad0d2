"""The figure of a paired comparison (`lipnorm.results.compare`): one row per comparison,
the per-seed means B − A as dots (the unit of the test), their mean with its Student-t
interval as a bar, and the zero line; the caption says what each mark is."""

from __future__ import annotations

import numpy as np

from lipnorm.results.compare import HELPS, HURTS, Comparison
from lipnorm.results.figures.style import COLUMN_WIDTH, Figure, paper_style, plt
from lipnorm.results.tables.compare import p_text

VERDICT_COLOURS = {HELPS: "#029e73", HURTS: "#d55e00"}
NEUTRAL = "#0173b2"
ROW_HEIGHT = 0.22  # inches per comparison


@paper_style
def comparison_figure(comparison: Comparison, unit: str = "") -> Figure:
    """Per comparison (a row, labelled by its group values), the per-seed means as grey
    dots, their mean and Student-t interval as a bar (green: the verdict "helps", red:
    "hurts", blue: no measurable effect), the Holm-adjusted exact p at the right; the
    zero line; `unit` names the axis's unit (e.g. "points")."""
    settings, tests, per_seed = comparison.settings, comparison.tests, comparison.per_seed
    groups = list(settings["groups"])
    rows = len(tests)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH * 1.6, 0.9 + ROW_HEIGHT * rows), layout="constrained")
    labels = []
    for y, (_, test) in enumerate(tests.iterrows()):
        where = np.ones(len(per_seed), dtype=bool)
        for group in groups:
            where &= (per_seed[group] == test[group]).to_numpy()
        values = per_seed.loc[where, "difference"].to_numpy()
        ax.plot(values, np.full(len(values), y), "o", color="0.6", markersize=2.2, zorder=2)
        colour = VERDICT_COLOURS.get(test["verdict"], NEUTRAL)
        ax.errorbar(test["mean"], y, xerr=[[test["mean"] - test["lo"]], [test["hi"] - test["mean"]]],
                    fmt="s", color=colour, markersize=3.5, capsize=2, zorder=3)
        labels.append(", ".join(str(test[group]) for group in groups) or "all runs")
        ax.annotate(f"p {p_text(test['p_holm'])}", (1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=6)
    ax.axvline(0.0, color="black", linewidth=0.8, zorder=1)
    ax.set_yticks(range(rows), labels)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xlabel(f"{settings['b']} − {settings['a']}" + (f" ({unit})" if unit else ""))
    confidence = round(100 * settings["confidence"])
    n_seeds = sorted(set(tests["n_seeds"]))
    family = settings["family_size"]
    untested = f" ({family - rows} not yet run)" if family > rows else ""
    fig.suptitle(
        f"dots: per-seed means over {settings['block']} ({'/'.join(map(str, n_seeds))} seeds); "
        f"bars: their mean, {confidence} % Student-t interval; p: exact sign-flip, Holm over {family}{untested}",
        fontsize=6,
    )
    return fig
