"""lipnorm's own datasets, each defined and registered in one module of this package:
its label and colour, the sizes the planner reads (`lipnorm.registry.DatasetSizes`), where
its raw files come from and their pinned sums (`lipnorm.registry.RawFiles`), and the
reader that turns the verified folder into a `NodeDataset` (`register_dataset(read=...)`).

`lipnorm.registry` imports every module here by name when it is first imported
(`lipnorm.registry.import_parts`): `ORDER` first (the order of lipnorm's tables and
figures), then any other module by name. A new dataset is a new module; nothing else
names it. At import a module here imports `lipnorm.registry` alone (the CLI and the
planner start without numpy, torch or DGL); numpy, DGL, OGB and `lipnorm.data` are
imported inside its reader. `lipnorm.data.load_dataset` dispatches through the registry.
"""

# The modules of lipnorm's own datasets, in the order their datasets are listed.
ORDER = ("planetoid", "coauthor_cs", "ppi", "ogbn_arxiv", "csbm")

# Imported first, so that the registry's own import of this package (above) finds every
# module here unimported, whichever module of the package was imported first.
from lipnorm import registry as _registry  # noqa: E402,F401
