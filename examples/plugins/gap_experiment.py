"""A lipnorm plugin registering an experiment: `gap`, the generalisation gap (training
accuracy at the last epoch minus test accuracy) against depth, per model.

One `register_experiment` call, and no edit inside lipnorm: with
`plugins: [examples/plugins/gap_experiment.py]` in the workflow config, `gap:` is a valid
experiment there (one grid, as `depth`), and the workflow trains its runs, aggregates
them and writes its table and figure; `lipnorm publish --plugin
examples/plugins/gap_experiment.py` publishes it with a section of its own in
`summary.md`:

    lipnorm tables gap --plugin examples/plugins/gap_experiment.py --aggregate-dir results/gap/aggregate --out-dir results/gap/tables
    lipnorm plots gap --plugin examples/plugins/gap_experiment.py --aggregate-dir results/gap/aggregate --out-dir results/gap/figures

pandas, numpy and matplotlib are imported where the builders run, so that naming the
plugin costs nothing to commands that only need its name. The figure's caption in the
workflow's report is `gap_by_depth.rst` beside this file; the table has none.
"""

from pathlib import Path

from lipnorm.experiments import RUN_COLUMNS, Output, register_experiment

EMPTY = "--"  # a model and depth without runs


def gap_cells(runs):
    """Per model and depth, the gap in points over seeds (`lipnorm.results.aggregate.seed_cells`:
    mean, std, n; no mean where a seed diverged)."""
    from lipnorm.results.aggregate import seed_cells

    return seed_cells(runs.assign(test_metric=runs["final_train"] - runs["test_metric"]), ["model", "depth"])


def gap_table(runs):
    """Models (rows) by depth (columns), `mean $\\pm$ std (n=N)` of the gap; nothing bold."""
    import numpy as np

    from lipnorm.results.aggregate import label, ordered
    from lipnorm.results.tables.cells import cell_texts

    cells = gap_cells(runs)
    cells["text"] = cell_texts(cells)
    text = cells.pivot(index="model", columns="depth", values="text").fillna(EMPTY)
    text = text.reindex(ordered("model", text.index))
    text.index = [label("model", model) for model in text.index]
    text.index.name, text.columns.name = "Model", "Layers"
    return text, np.zeros(text.shape, dtype=bool)


def gap_figure(runs):
    """The mean gap against depth, one line per model (cells with a diverged seed left out)."""
    import matplotlib.pyplot as plt

    from lipnorm import registry
    from lipnorm.results.aggregate import label, ordered

    cells = gap_cells(runs)
    models = ordered("model", cells["model"])
    colours = registry.figure_palette(models)
    fig, ax = plt.subplots(figsize=(3.3, 2.0), layout="constrained")
    for model in models:
        here = cells.loc[(cells["model"] == model) & cells["valid"]]
        ax.plot(here["depth"], here["mean"], marker="o", color=colours[model], label=label("model", model))
    ax.set_xlabel("Depth (layers)")
    ax.set_ylabel("Train − test accuracy (points)")
    ax.legend(frameon=False)
    return fig


def gap_section(folder, runs):
    """The published summary's section: the table, as Markdown."""
    from lipnorm.results.tables.markdown import markdown

    return [
        "Training accuracy at the last epoch minus test accuracy (points): mean ± std over n seeds.",
        "",
        *markdown(*gap_table(runs), index=True),
    ]


register_experiment(
    "gap",
    title="generalisation gap against depth",
    tables=(Output("gap_table", gap_table),),
    figures=(Output("gap_by_depth", gap_figure, caption=Path(__file__).with_name("gap_by_depth.rst")),),
    section=gap_section,
    # Published runs.csv: the default columns and the training accuracy the gap reads.
    run_columns=(*RUN_COLUMNS, "final_train"),
)
