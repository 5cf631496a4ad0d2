"""The report of a comparison (`lipnorm compare --report`, `compare.write_report`): its
tables round-trip, its text cells against hand-computed intervals and p-values, the LaTeX
escapes, the figure's marks, and the command it records."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from lipnorm import cli
from lipnorm.results.figures.style import plt
from lipnorm.results.compare import REPORT_FILES, compare_arms, write_report
from lipnorm.results.figures.compare import comparison_figure
from lipnorm.results.tables.compare import comparison_latex, comparison_text, interval_text


def toy_runs() -> pd.DataFrame:
    """Two groups, 4 seeds, depths 1-3. Group "up": B − A per seed 1, 2, 3, 4 (the same at
    every depth); group "down": −0.5 at every seed and depth but seed 0's +0.5."""
    rows = []
    for group, shift in (("up", None), ("down", None)):
        for seed in range(4):
            for depth in (1, 2, 3):
                delta = seed + 1.0 if group == "up" else (0.5 if seed == 0 else -0.5)
                rows.append({"group": group, "seed": seed, "depth": depth, "arm": "a", "acc": 10.0 + depth})
                rows.append({"group": group, "seed": seed, "depth": depth, "arm": "b", "acc": 10.0 + depth + delta})
    return pd.DataFrame(rows)


def toy_comparison():
    return compare_arms(toy_runs(), "arm", "a", "b", "acc", groups=["group"])


def test_cells_are_the_hand_computed_interval_and_p_values():
    text, bold = comparison_text(toy_comparison())
    # "down" first (groups sorted): per-seed means 0.5, -0.5, -0.5, -0.5: mean -0.25,
    # sd 0.5, t(0.975, 3) 3.182 -> -0.25 +- 0.7956; exact p: |mean| 0.25 is reached by
    # the 8 assignments with three of one sign and one of the other... written out:
    values = [0.5, -0.5, -0.5, -0.5]
    half = stats.t.ppf(0.975, 3) * 0.5 / 2
    assert (round(-0.25 - half, 1), round(-0.25 + half, 1)) == (-1.0, 0.5)
    flips = [sum(s * v for s, v in zip(signs, values)) / 4
             for signs in [(a, b, c, d) for a in (1, -1) for b in (1, -1) for c in (1, -1) for d in (1, -1)]]
    p_down = sum(abs(f) >= 0.25 - 1e-12 for f in flips) / 16
    # "up": 1, 2, 3, 4: mean 2.5, sd 1.291, half-width 2.054; exact p 2/16.
    half_up = stats.t.ppf(0.975, 3) * math.sqrt(5 / 3) / 2
    assert (round(2.5 - half_up, 1), round(2.5 + half_up, 1)) == (0.4, 4.6)
    holm_down = min(1.0, max(2 * 0.125, p_down))
    assert list(text.index) == ["down", "up"]
    assert text.loc["up"].tolist() == ["4", "12 (0)", "+2.5 [+0.4, +4.6]", "0.12", "0.25", "no measurable effect"]
    assert text.loc["down"].tolist() == [
        "4", "12 (0)", "−0.2 [−1.0, +0.5]", f"{p_down:.2g}", f"{holm_down:.2g}".replace("1.0", "1"),
        "no measurable effect",
    ]
    assert list(text.columns) == ["seeds", "pairs (left out)", "b − a [95 % CI]", "p exact", "p Holm", "verdict"]
    assert not bold.any()


def test_numbers_near_zero_keep_two_decimals():
    assert interval_text(-0.01, -1.23, 0.04) == "−0.01 [−1.2, +0.04]"
    assert interval_text(5.23, 0.004, 10.46) == "+5.2 [+0.00, +10.5]"
    assert interval_text(-0.25, -1.04, 0.54) == "−0.2 [−1.0, +0.5]"


def test_latex_escapes_minus_and_percent():
    latex = comparison_latex(toy_comparison())
    assert "b $-$ a [95 \\% CI]" in latex
    assert "$-$0.2 [$-$1.0, +0.5]" in latex
    assert "−" not in latex


def test_figure_marks_every_comparison_and_every_seed():
    comparison = toy_comparison()
    fig = comparison_figure(comparison, unit="points")
    ax = fig.axes[0]
    assert len(ax.containers) == 2  # one error bar per comparison
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert sum(len(line.get_xdata()) for line in dots) == 8  # 4 seeds x 2 comparisons
    assert [tick.get_text() for tick in ax.get_yticklabels()] == ["down", "up"]
    assert any(list(line.get_xdata()) == [0, 0] for line in ax.lines)  # the zero line
    assert ax.get_xlabel() == "b − a (points)"
    assert "95 % Student-t interval" in fig._suptitle.get_text()
    assert fig._suptitle.get_text().endswith("Holm over 2")
    plt.close(fig)


def test_figure_says_how_many_of_the_family_have_not_run():
    comparison = compare_arms(toy_runs(), "arm", "a", "b", "acc", groups=["group"], family_size=6)
    fig = comparison_figure(comparison)
    assert fig._suptitle.get_text().endswith("Holm over 6 (4 not yet run)")
    plt.close(fig)


def test_report_files_round_trip(tmp_path):
    comparison = toy_comparison()
    paths = write_report(comparison, tmp_path / "report", sources=["runs.csv"], command="lipnorm compare x")
    assert [path.name for path in paths] == list(REPORT_FILES)
    assert all(path.is_file() for path in paths)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "report" / "tests.csv"), comparison.tests, check_dtype=False)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "report" / "per_seed.csv"), comparison.per_seed,
                                  check_dtype=False)
    markdown = (tmp_path / "report" / "comparison.md").read_text()
    assert "Written by `lipnorm compare x` from `runs.csv`." in markdown
    assert "| up | 4 | 12 (0) | +2.5 [+0.4, +4.6] | 0.12 | 0.25 | no measurable effect |" in markdown
    assert [p.name for p in (tmp_path).iterdir()] == ["report"]  # nothing half-written beside it


def test_cli_report_records_its_command(tmp_path, capsys):
    runs = tmp_path / "runs.csv"
    toy_runs().to_csv(runs, index=False)
    out = tmp_path / "out"
    assert cli.main(["compare", str(runs), "--axis", "arm", "--a", "a", "--b", "b", "--metric", "acc",
                     "--groups", "group", "--report", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith(str(out / "comparison.png"))
    markdown = (out / "comparison.md").read_text()
    assert (f"Written by `lipnorm compare {runs} --axis arm --a a --b b --groups group --block depth --scale 1 "
            f"--metric acc --report {out}`") in markdown


def test_cli_report_without_plots_extra_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    """Without matplotlib (the plots extra) the report is refused before anything is
    computed or written, naming the extra."""
    import sys

    runs = tmp_path / "runs.csv"
    toy_runs().to_csv(runs, index=False)
    for name in [name for name in sys.modules if name.startswith(("matplotlib", "seaborn", "lipnorm.results.figures"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", str(runs), "--axis", "arm", "--a", "a", "--b", "b", "--metric", "acc",
                  "--groups", "group", "--report", str(tmp_path / "out")])
    assert exit_info.value.code != 0
    err = capsys.readouterr()
    assert "plots" in err.err and err.out == ""
    assert not (tmp_path / "out").exists()
