"""The table of a paired comparison (`lipnorm.results.compare`): one row per comparison,
its seeds and pairs, the effect with its interval, the exact and Holm-adjusted p-values
and the verdict; rows whose verdict is not "no measurable effect" in bold. `lipnorm
compare --report` writes it as LaTeX and Markdown."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lipnorm.results.compare import NO_EFFECT, Comparison


def p_text(p: float) -> str:
    """A p-value to 2 significant digits, "1" for 1 (Holm caps there)."""
    return "1" if p >= 1 else f"{p:.2g}"


def signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def interval_text(mean: float, lo: float, hi: float) -> str:
    """``+5.2 [+1.8, +8.6]``: one decimal, a number to two where it lies within 0.05 of 0
    (so that an interval touching 0 never prints as if it excluded or reached it)."""
    mean, lo, hi = (f"{x:+.2f}".replace("-", "−") if abs(x) < 0.05 else signed(x) for x in (mean, lo, hi))
    return f"{mean} [{lo}, {hi}]"


def comparison_text(comparison: Comparison) -> tuple[pd.DataFrame, np.ndarray]:
    """The (text, bold) frame of `comparison.tests`: indexed by the group columns; "seeds",
    "pairs (left out)", "B − A [95 % CI]" (Student-t interval of the per-seed means),
    "p exact", "p Holm", "verdict"."""
    settings, tests = comparison.settings, comparison.tests
    groups = list(settings["groups"])
    confidence = round(100 * settings["confidence"])
    effect = f"{settings['b']} − {settings['a']} [{confidence} % CI]"
    text = pd.DataFrame({
        "seeds": tests["n_seeds"].astype(str),
        "pairs (left out)": [f"{n} ({u})" for n, u in zip(tests["n_pairs"], tests["n_unpaired"])],
        effect: [interval_text(m, lo, hi) for m, lo, hi in zip(tests["mean"], tests["lo"], tests["hi"])],
        "p exact": tests["p_exact"].map(p_text),
        "p Holm": tests["p_holm"].map(p_text),
        "verdict": tests["verdict"],
    })
    if len(groups) == 1:
        text.index = pd.Index(tests[groups[0]].astype(str), name=groups[0])
    elif groups:
        text.index = pd.MultiIndex.from_frame(tests[groups].astype(str))
    bold = np.repeat((tests["verdict"] != NO_EFFECT).to_numpy()[:, None], text.shape[1], axis=1)
    return text, bold


def comparison_latex(comparison: Comparison) -> str:
    """`comparison_text` as a booktabs tabular: minus signs as ``$-$``, heads through
    `latex_head`."""
    from lipnorm.results.tables.latex import latex_head, render

    text, bold = comparison_text(comparison)
    text = text.map(lambda cell: cell.replace("−", "$-$"))
    text.columns = [latex_head(column) for column in text.columns]
    text.attrs["latex_columns"] = True
    return render(text, bold)
