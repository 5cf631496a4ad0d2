"""What becomes of finished runs: their aggregation (`aggregate`), what tables, figures
and published results read alike (`analysis`), the remedies experiment's statistics
(`remedies`: depth rules, paired Student-t intervals), the tables with their LaTeX and
Markdown renderers (`tables`), the figures (`figures`), and the published results with
their `summary.md` sections (`publish`, `sections`).

Importing this package imports none of them; only `figures` imports matplotlib.
"""
