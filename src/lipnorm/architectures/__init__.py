"""lipnorm's own architectures, each registered in one module of this package: `gat`,
`gt`, `gat_classic` (the architecture `gat-classic`), `gcn`. A module holds the
architecture's `register_architecture` call (label, colours, capabilities, dropouts)
and what is specific to it and needs no torch: its settings -> network factory where
that is a thin function (`gcn`'s `gcn_layer`), its torch-free checks (`gat`'s
`literature_gat_seed_batch_check`). The torch layer classes and networks they build
stay in `lipnorm.nn`, a library of layers as DGL's `dgl.nn` is, imported inside the
factory's body or named by a `"module:attribute"` string (`DeepGAT.from_config`).

Found by name (`lipnorm.registry.import_parts`, which says in what order): a new
architecture is a new module, named nowhere else. At import a module here imports
`lipnorm.registry` alone, so that the CLI's start and the workflow's parse load no torch.
"""

# The modules of lipnorm's own architectures, in the order their architectures are listed.
ORDER = ("gat", "gt", "gat_classic", "gcn")

# Imported first, so that the registry's own import of this package (above) finds every
# module here unimported, whichever module of the package was imported first.
from lipnorm import registry as _registry  # noqa: E402,F401
