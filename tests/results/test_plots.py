"""`lipnorm plots` (and the CLI round trip): figures of synthetic runs, checked through
their matplotlib objects (panels, labels, legends, scales, plotted values)."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import LogNorm, to_hex
from tests.synthetic_runs import (
    BASE_CONFIG,
    DIAGNOSE_ALPHAS,
    OFFICIAL,
    attention_grad_norm,
    layer_stat,
    write_diagnose,
    write_grid,
)

from lipnorm.bench.figure import BENCH_PALETTE, epoch_time_vs_edges
from lipnorm.cli import main
from lipnorm.results.aggregate import EXPERIMENTS, aggregate_runs
from lipnorm.results.analysis import LAYER_METRICS, NORM_FLOOR
from lipnorm.results.figures import FIGURES, PALETTE, write_figures
from lipnorm.results.figures.accuracy import accuracy_vs_alpha, accuracy_vs_depth
from lipnorm.results.figures.layerstats import (
    COMPLEMENT_FLOOR,
    RECIPE_COLOUR,
    alpha_colours,
    alpha_layerstats,
    layerstats_by_epoch,
    layerstats_by_layer,
)
from lipnorm.results.figures.probe import lipschitz_probe
from lipnorm.results.figures.style import COLUMN_WIDTH
from lipnorm.results.figures.training import gradient_heatmaps, gradient_ratio, training_curves
from lipnorm.results.tables import TABLES

REPORT = Path(__file__).resolve().parents[2] / "workflow" / "report"


def legend_texts(fig) -> list[str]:
    (legend,) = fig.legends
    return [t.get_text() for t in legend.get_texts()]


def line_of(ax, model):
    """The seaborn mean line drawn in `model`'s colour."""
    (line,) = [l for l in ax.lines if to_hex(l.get_color()) == PALETTE[model]]
    return line


@pytest.fixture(scope="module")
def depth_runs(tmp_path_factory):
    records = write_grid(
        tmp_path_factory.mktemp("depth"),
        {"missing_rate": [0, 100], "dataset": ["cora", "citeseer"], "model": ["gat", "gat-lip"],
         "depth": [2, 4]},
        diverged={(0, "cora", "gat", 4, 2)},
    )
    return records, aggregate_runs([r["run_dir"] for r in records])


@pytest.fixture(scope="module")
def gradient_runs(tmp_path_factory):
    records = write_grid(
        tmp_path_factory.mktemp("gradients"), {"model": ["gat", "gat-lip"], "depth": [2, 4, 6]},
        diverged={("gat", 6, 0)},
    )
    return records, aggregate_runs([r["run_dir"] for r in records])


def test_accuracy_vs_depth_panels_lines_and_diverged_marker(depth_runs):
    records, tables = depth_runs
    fig = accuracy_vs_depth(tables["runs"])
    axes = np.array(fig.axes).reshape(2, 2)  # rows: missing rates; columns: datasets
    assert [ax.get_title() for ax in axes.flat] == [
        "Cora, 0% missing", "CiteSeer, 0% missing", "Cora, 100% missing", "CiteSeer, 100% missing"
    ]
    assert [ax.get_xlabel() for ax in axes.flat] == ["", "", "Depth (layers)", "Depth (layers)"]
    assert [ax.get_ylabel() for ax in axes.flat] == ["Test accuracy (%)", "", "Test accuracy (%)", ""]
    assert legend_texts(fig) == ["GAT", "GAT-Lip", "diverged"]
    assert fig.get_figwidth() == pytest.approx(COLUMN_WIDTH)
    # The plotted means are the seed means; the diverged (Cora, rate 0, GAT, depth 4)
    # setting is no point of the line but a × at depth 4.
    for (rate, dataset), ax in zip([(0, "cora"), (0, "citeseer"), (100, "cora"), (100, "citeseer")],
                                   axes.flat):
        for model in ("gat", "gat-lip"):
            depths = [2] if (rate, dataset, model) == (0, "cora", "gat") else [2, 4]
            expected = [
                np.mean([r["test_metric"] for r in records if (r["missing_rate"], r["dataset"],
                         r["model"], r["depth"]) == (rate, dataset, model, d)]) * 100
                for d in depths
            ]
            line = line_of(ax, model)
            assert list(line.get_xdata()) == depths
            assert line.get_ydata() == pytest.approx(expected)
    (crosses,) = axes[0, 0].collections[-1:]
    assert crosses.get_offsets()[:, 0].tolist() == [4]
    plt.close(fig)


def test_gradient_heatmaps_show_median_layer_norms_on_a_log_scale(gradient_runs):
    _, tables = gradient_runs
    fig = gradient_heatmaps(tables["runs"], tables["gradnorms"])
    *panels, colorbar = fig.axes
    assert len(panels) == 3 * 2  # depths 2, 4, 6 × GAT, GAT-Lip
    assert colorbar.get_ylabel() == "Gradient norm"
    assert [ax.get_title() for ax in panels[:2]] == ["GAT, Cora", "GAT-Lip, Cora"]
    assert [ax.get_ylabel() for ax in panels[::2]] == ["Layer (L=2)", "Layer (L=4)", "Layer (L=6)"]
    assert [ax.get_xlabel() for ax in panels[-2:]] == ["Epoch", "Epoch"]
    norms = [ax.collections[0].norm for ax in panels]
    assert all(isinstance(n, LogNorm) for n in norms) and len({(n.vmin, n.vmax) for n in norms}) == 1
    # GAT-Lip at depth 4: rows are layers 0 (input) .. 5 (output), columns epochs; the
    # synthetic norms are the same for every seed, so the median is the written value.
    epochs, depth = BASE_CONFIG["epochs"], 4
    expected = np.array(
        [[0.5] * epochs]
        + [[attention_grad_norm("gat-lip", layer, e) for e in range(epochs)] for layer in range(1, depth + 1)]
        + [[0.25] * epochs]
    )
    shown = panels[3].collections[0].get_array().reshape(depth + 2, epochs)
    assert np.asarray(shown) == pytest.approx(expected)
    assert "1/3 diverged" in [t.get_text() for t in panels[4].texts]  # GAT at depth 6
    plt.close(fig)


def test_gradient_ratio_is_the_geometric_seed_mean_of_median_epoch_ratios(gradient_runs):
    _, tables = gradient_runs
    fig = gradient_ratio(tables["runs"], tables["gradnorms"])
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("Depth (layers)", "Max/min layer gradient norm")
    assert legend_texts(fig) == ["GAT", "GAT-Lip", "diverged"]
    # Synthetic norms: attention layer l has c(epoch) * decay**-l, so max/min = decay**(L-1).
    gat, lip = line_of(ax, "gat"), line_of(ax, "gat-lip")
    assert list(gat.get_xdata()) == [2, 4]  # depth 6 has a diverged seed
    assert gat.get_ydata() == pytest.approx([10.0 ** (d - 1) for d in (2, 4)])
    assert lip.get_ydata() == pytest.approx([2 ** ((d - 1) / 8) for d in (2, 4, 6)])
    plt.close(fig)


def test_training_curves_average_the_seeds_that_did_not_diverge(gradient_runs):
    records, tables = gradient_runs
    fig = training_curves(tables["runs"], tables["epochs"])
    loss_ax, val_ax = fig.axes
    assert loss_ax.get_title() == "Cora, L=6 (1/6 diverged)"
    assert (loss_ax.get_ylabel(), val_ax.get_ylabel()) == ("Training loss", "Validation accuracy (%)")
    assert val_ax.get_xlabel() == "Epoch"
    epochs = tables["epochs"]
    for model in ("gat", "gat-lip"):
        ok = [r["run_dir"] for r in records
              if r["model"] == model and r["depth"] == 6 and r["status"] == "ok"]
        mine = epochs[epochs["run_dir"].isin(ok)]
        assert line_of(loss_ax, model).get_ydata() == pytest.approx(
            mine.groupby("epoch")["train_loss"].mean().to_numpy())
        assert line_of(val_ax, model).get_ydata() == pytest.approx(
            mine.groupby("epoch")["val_metric"].mean().to_numpy() * 100)
    assert legend_texts(fig) == ["GAT", "GAT-Lip"]
    plt.close(fig)


def test_accuracy_vs_alpha_uses_a_log_alpha_axis(tmp_path):
    records = write_grid(tmp_path, {"depth": [2, 4], "alpha": [0.5, 2.0, 8.0]}, model="gat-lip")
    runs = aggregate_runs([r["run_dir"] for r in records])["runs"]
    fig = accuracy_vs_alpha(runs)
    assert [ax.get_title() for ax in fig.axes] == ["Cora, 2 layers", "Cora, 4 layers"]
    assert all(ax.get_xscale() == "log" and ax.get_xlabel() == "$\\alpha$" for ax in fig.axes)
    assert legend_texts(fig) == ["GAT-Lip"]
    assert line_of(fig.axes[1], "gat-lip").get_xdata() == pytest.approx([0.5, 2.0, 8.0])
    plt.close(fig)
    with pytest.raises(ValueError, match=r"alpha values \[0.0, 0.5, 2.0, 8.0\] must be > 0"):
        accuracy_vs_alpha(runs.assign(alpha=runs["alpha"].where(runs["depth"] == 4, 0.0)))


def test_lipschitz_probe_is_log_log_per_input_kind():
    probe = pd.DataFrame(
        [(m, s, k, s ** (1.0 if m == "gat" else 0.0) * (2 if k == "adversarial" else 1))
         for m in ("gat-lip", "gat") for s in (1, 10, 100) for k in ("random", "adversarial")],
        columns=["model", "s", "kind", "estimate"],
    )
    fig = lipschitz_probe(probe)
    assert [ax.get_title() for ax in fig.axes] == ["adversarial inputs", "random inputs"]
    assert all(ax.get_xscale() == ax.get_yscale() == "log" for ax in fig.axes)
    assert [ax.get_xlabel() for ax in fig.axes] == ["Input scale $s$"] * 2
    assert [ax.get_ylabel() for ax in fig.axes] == ["Lipschitz estimate", ""]
    assert legend_texts(fig) == ["GAT", "GAT-Lip"]
    assert line_of(fig.axes[1], "gat").get_ydata() == pytest.approx([1, 10, 100])
    plt.close(fig)


def test_epoch_time_vs_edges_plots_csbm_medians_per_implementation_and_marks_skipped_panels():
    # GAT at depths 2 and 10 (8 x 8), GT at depth 2 only: GT's depth-10 panel is empty.
    # Cora rows must be ignored (the x axis is the csbm edge count).
    rows = []
    for family, impls, depths in (("gat", ("gat", "gat-lip"), (2, 10)), ("gt", ("gt",), (2,))):
        for impl in impls:
            for depth in depths:
                for edges in (10_000, 100_000):
                    for r, factor in enumerate((1.0, 1.5, 0.5)):  # median = the 1.0 round
                        seconds = factor * depth * edges / 1e6 * (1.2 if impl == "gat-lip" else 1.0)
                        rows.append(("csbm", family, 8, 8, depth, impl, edges, r, seconds))
    rows.append(("cora", "gat", 8, 8, 2, "gat", 13_264, 0, 99.0))
    times = pd.DataFrame(rows, columns=["dataset", "family", "heads", "hidden", "depth",
                                        "implementation", "edges", "round", "value"])
    fig = epoch_time_vs_edges(times)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["GAT, depth 2, 8 × 8", "GAT, depth 10, 8 × 8", "GT, depth 2, 8 × 8",
                      "GT, depth 10, 8 × 8"]
    gat_lip = [l for l in fig.axes[1].lines if to_hex(l.get_color()) == BENCH_PALETTE["gat-lip"]]
    assert len(gat_lip) == 1
    assert list(gat_lip[0].get_xdata()) == [10_000, 100_000]
    assert gat_lip[0].get_ydata() == pytest.approx([0.12, 1.2])
    assert all(list(line.get_xdata()) == [10_000, 100_000] for line in fig.axes[0].lines)
    assert fig.axes[0].get_yscale() == fig.axes[0].get_xscale() == "log"
    assert [t.get_text() for t in fig.axes[3].texts] == ["over the work budget"]
    assert not fig.axes[3].lines
    assert legend_texts(fig) == ["gat", "gat-lip", "gt"]
    plt.close(fig)


@pytest.fixture(scope="module")
def diagnose_runs(tmp_path_factory):
    records = write_diagnose(tmp_path_factory.mktemp("diagnose"))
    return records, aggregate_runs([r["run_dir"] for r in records])


METRICS = list(LAYER_METRICS)
METRIC_LABELS = ["Dirichlet energy", "MAD", "Rayleigh quotient", "1 − attention entropy", "Output norm"]
LAST_EPOCH = BASE_CONFIG["epochs"] - 1


def seed_mean(metric, values):
    """The band's centre: the geometric mean of the floored values as drawn (seaborn
    averages in the log axis' space); the entropy is drawn as 1 - entropy."""
    values = np.asarray(values, dtype=float)
    if metric == "attention_entropy":
        values = np.maximum(1.0 - values, COMPLEMENT_FLOOR)
    return np.exp(np.log(np.maximum(values, NORM_FLOOR)).mean())


def styled_line(ax, colour, linestyle):
    (line,) = [l for l in ax.lines
               if to_hex(l.get_color()) == colour and l.get_linestyle() == linestyle]
    return line


def grid_records(records, **equal):
    """The runs of the diagnose grid (this pipeline's recipe, α = 1) matching `equal`."""
    return [r for r in records if r.get("recipe") == "lipnorm" and r["alpha"] == 1
            and all(r[k] == v for k, v in equal.items())]


def check_model_dropout_panels(fig, records, x):
    """Layout and plotted means of layerstats_by_layer (x "layer") or _by_epoch (x "epoch")."""
    axes = np.array(fig.axes).reshape(len(METRICS), 2)  # rows: metrics; columns: depths 2, 6
    assert [ax.get_ylabel() for ax in axes[:, 0]] == METRIC_LABELS
    assert all(ax.get_ylabel() == "" for ax in axes[:, 1])
    assert [ax.get_xlabel() for ax in axes[-1]] == ["Layer" if x == "layer" else "Epoch"] * 2
    assert all(ax.get_xlabel() == "" for ax in axes[:-1].flat)
    for row, metric in zip(axes, METRICS):
        for ax in row:
            assert ax.get_yscale() == "log"
    assert legend_texts(fig) == ["GAT", "GAT-Lip", "dropout 0.6", "dropout 0"]
    # GAT at depth 6 with dropout 0.6 has a diverged seed: not drawn but named.
    assert fig._supxlabel.get_text() == "Not drawn, a seed diverged: L=6 GAT, dropout 0.6 (1/2)"
    for j, depth in enumerate((2, 6)):
        drawn = [(m, fd) for m in ("gat", "gat-lip") for fd in (0.6, 0.0)
                 if (m, depth, fd) != ("gat", 6, 0.6)]
        for i, metric in enumerate(METRICS):
            ax = axes[i, j]
            assert len(ax.lines) == len(drawn)
            for model, fd in drawn:
                line = styled_line(ax, PALETTE[model], "-" if fd == 0.6 else "--")
                seeds = grid_records(records, model=model, depth=depth, feat_drop=fd)
                assert len(seeds) == 2
                xs = list(range(1, depth + 1)) if x == "layer" else list(range(BASE_CONFIG["epochs"]))
                expected = [
                    seed_mean(metric, [
                        layer_stat(metric, **{**r, "layer": xv if x == "layer" else depth,
                                              "epoch": LAST_EPOCH if x == "layer" else xv})
                        for r in seeds])
                    for xv in xs
                ]
                assert list(line.get_xdata()) == xs
                assert line.get_ydata() == pytest.approx(expected, rel=1e-9)


def test_layerstats_by_layer_draws_seed_means_per_model_dropout_and_depth(diagnose_runs):
    records, tables = diagnose_runs
    fig = layerstats_by_layer(tables["runs"], tables["layerstats"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["2 layers", "6 layers"]
    assert all(ax.get_title() == "" for ax in fig.axes[2:])
    check_model_dropout_panels(fig, records, "layer")
    plt.close(fig)


def test_layerstats_by_layer_floors_zero_energies_on_the_log_axis(diagnose_runs):
    _, tables = diagnose_runs
    fig = layerstats_by_layer(tables["runs"], tables["layerstats"])
    energy_6 = fig.axes[1]  # Dirichlet energy, depth 6
    gat = styled_line(energy_6, PALETTE["gat"], "--")
    # The synthetic GAT energy is exactly 0 from layer 5 on: drawn at the floor.
    assert gat.get_ydata()[4:] == pytest.approx([NORM_FLOOR] * 2, rel=1e-9)
    assert np.isfinite(gat.get_ydata()).all() and energy_6.get_ylim()[0] > 0
    plt.close(fig)


def test_layerstats_by_epoch_draws_the_last_layer_over_epochs(diagnose_runs):
    records, tables = diagnose_runs
    fig = layerstats_by_epoch(tables["runs"], tables["layerstats"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["Layer 2 of 2", "Layer 6 of 6"]
    check_model_dropout_panels(fig, records, "epoch")
    plt.close(fig)


def test_layerstats_figures_treat_a_missing_recipe_column_as_this_pipelines(diagnose_runs):
    records, tables = diagnose_runs
    runs = tables["runs"]
    older = runs.loc[runs["recipe"] == "lipnorm"].drop(columns="recipe")
    fig = layerstats_by_layer(older, tables["layerstats"])
    check_model_dropout_panels(fig, records, "layer")
    plt.close(fig)


def test_alpha_layerstats_draws_each_alpha_and_the_authors_recipe(diagnose_runs):
    records, tables = diagnose_runs
    fig = alpha_layerstats(tables["runs"], tables["layerstats"])
    assert len(fig.axes) == len(METRICS)  # one depth (6) in the α study
    assert [ax.get_title() for ax in fig.axes] == METRIC_LABELS
    assert [ax.get_ylabel() for ax in fig.axes] == ["GAT-Lip, L=6\n(dropout 0)"] + [""] * 4
    assert all(ax.get_xlabel() == "Layer" for ax in fig.axes)
    alphas = [1.0, *DIAGNOSE_ALPHAS]
    colours = alpha_colours(alphas)
    assert len(set(colours.values())) == 3 and RECIPE_COLOUR not in colours.values()
    assert legend_texts(fig) == [
        "$\\alpha$ = 1", "$\\alpha$ = 4", "$\\alpha$ = 16",
        "GAT-Lip, authors' recipe (8×64, dropout 0.6, 2 epochs)",
    ]
    official = [r for r in records if r.get("recipe") == "official"]
    for ax, metric in zip(fig.axes, METRICS):
        assert len(ax.lines) == 4
        for alpha in alphas:
            seeds = [r for r in records if r.get("recipe") == "lipnorm" and r["model"] == "gat-lip"
                     and r["depth"] == 6 and r["feat_drop"] == 0.0 and r["alpha"] == alpha]
            assert len(seeds) == 2
            expected = [
                seed_mean(metric, [layer_stat(metric, **{**r, "layer": layer, "epoch": LAST_EPOCH})
                                   for r in seeds])
                for layer in range(1, 7)
            ]
            assert styled_line(ax, colours[alpha], "-").get_ydata() == pytest.approx(expected, rel=1e-9)
        # The authors' recipe ran OFFICIAL["epochs"] epochs: its last is epoch 1.
        (theirs,) = official
        expected = [seed_mean(metric, [layer_stat(metric, **{**theirs, "layer": layer,
                                                             "epoch": OFFICIAL["epochs"] - 1})])
                    for layer in range(1, 7)]
        line = styled_line(ax, RECIPE_COLOUR, "-.")
        assert line.get_ydata() == pytest.approx(expected, rel=1e-9)
    plt.close(fig)


def test_alpha_layerstats_needs_an_alpha_study(diagnose_runs):
    _, tables = diagnose_runs
    runs = tables["runs"]
    with pytest.raises(ValueError, match="no runs of this pipeline's recipe with alpha != 1"):
        alpha_layerstats(runs.loc[runs["alpha"] == 1], tables["layerstats"])


def test_layerstats_figures_name_finished_runs_without_statistics(diagnose_runs):
    records, tables = diagnose_runs
    stats = tables["layerstats"]
    lost = records[0]["run_dir"]
    message = f"no layer statistics (layerstats) for runs ['{lost}']"
    with pytest.raises(ValueError, match=re.escape(message)):
        layerstats_by_layer(tables["runs"], stats.loc[stats["run_dir"] != lost])


@pytest.mark.slow
def test_write_figures_of_diagnose_writes_every_stem_and_needs_layerstats(diagnose_runs, tmp_path):
    _, tables = diagnose_runs
    agg = tmp_path / "aggregate"
    agg.mkdir()
    tables["runs"].to_parquet(agg / "runs.parquet")
    with pytest.raises(ValueError,
                       match="layerstats.parquet does not exist; `lipnorm aggregate --out-dir"):
        write_figures("diagnose", agg, tmp_path / "figures")
    tables["layerstats"].to_parquet(agg / "layerstats.parquet")
    written = write_figures("diagnose", agg, tmp_path / "figures")
    assert [p.name for p in written] == [
        f"{s}.{ext}" for s in ["layerstats_by_layer", "layerstats_by_epoch", "alpha_layerstats"]
        for ext in ("pdf", "png")]
    assert FIGURES["diagnose"] == ["layerstats_by_layer", "layerstats_by_epoch", "alpha_layerstats"]
    for path in written:
        magic = b"%PDF-" if path.suffix == ".pdf" else b"\x89PNG\r\n\x1a\n"
        assert path.read_bytes()[:len(magic)] == magic
    assert plt.get_fignums() == []


def test_every_stem_has_a_report_caption_and_stems_are_unique():
    assert set(TABLES) == set(FIGURES) == set(EXPERIMENTS)
    stems = [s for d in (TABLES, FIGURES) for stems in d.values() for s in stems]
    assert len(stems) == len(set(stems))
    for stem in stems:
        caption = REPORT / f"{stem}.rst"
        assert caption.is_file() and caption.read_text().strip(), stem
    assert (REPORT / "workflow.rst").read_text().strip()


@pytest.mark.slow
def test_cli_round_trip_writes_aggregate_tables_and_figures(depth_runs, tmp_path, capsys):
    records, _ = depth_runs
    agg, tables, figures = tmp_path / "aggregate", tmp_path / "tables", tmp_path / "figures"
    assert main(["aggregate", "--out-dir", str(agg), *[r["run_dir"] for r in records]]) == 0
    assert main(["tables", "depth", "--aggregate-dir", str(agg), "--out-dir", str(tables)]) == 0
    assert main(["plots", "depth", "--aggregate-dir", str(agg), "--out-dir", str(figures)]) == 0
    assert sorted(p.name for p in tables.iterdir()) == sorted(f"{s}.tex" for s in TABLES["depth"])
    assert sorted(p.name for p in figures.iterdir()) == sorted(
        f"{s}.{ext}" for s in FIGURES["depth"] for ext in ("pdf", "png"))
    for stem in FIGURES["depth"]:
        assert (figures / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        assert (figures / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out.split()
    assert str(figures / f"{FIGURES['depth'][0]}.png") in printed
    assert plt.get_fignums() == []  # figures are closed after saving

    with pytest.raises(SystemExit) as exit_code:
        main(["aggregate", "--out-dir", str(agg), str(tmp_path / "never-ran")])
    assert exit_code.value.code == 2
    assert f"{tmp_path / 'never-ran'} (missing summary.json" in capsys.readouterr().err


@pytest.mark.slow
def test_write_figures_writes_pdf_and_png_for_every_stem(gradient_runs, tmp_path):
    _, tables = gradient_runs
    agg = tmp_path / "aggregate"
    agg.mkdir()
    for name in ("runs", "gradnorms", "epochs"):
        tables[name].to_parquet(agg / f"{name}.parquet")
    written = write_figures("gradients", agg, tmp_path / "figures")
    assert [p.name for p in written] == [
        f"{s}.{ext}" for s in FIGURES["gradients"] for ext in ("pdf", "png")]
    assert all(p.stat().st_size > 0 for p in written)
    assert plt.get_fignums() == []
    with pytest.raises(ValueError, match="probe.parquet does not exist; `lipnorm probe"):
        write_figures("lipschitz", agg, tmp_path / "figures")
