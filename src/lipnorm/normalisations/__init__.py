"""lipnorm's own representation normalisations (applied after each layer), each
registered in one module of this package: `pairnorm`, `batchnorm`, `dgn`. A module holds
the normalisation's `register_norm` call (label, colours, the deep model's attribute)
and its factory `factory(width, config) -> nn.Module`, a thin settings -> module
function that imports its class from `lipnorm.nn.norm` (the library of normalisation
layers, which imports torch) inside its body.

Found by name (`lipnorm.registry.import_parts`, which says in what order): a new
normalisation is a new module, named nowhere else. At import a module here imports
`lipnorm.registry` alone, so that the CLI's start and the workflow's parse load no torch.
"""

# The modules of lipnorm's own normalisations, in the order their normalisations are listed.
ORDER = ("pairnorm", "batchnorm", "dgn")

# Imported first, so that the registry's own import of this package (above) finds every
# module here unimported, whichever module of the package was imported first.
from lipnorm import registry as _registry  # noqa: E402,F401
