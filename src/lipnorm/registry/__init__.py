"""Registries of architectures, representation normalisations and datasets, and plugins.

Every list of names the project uses (model names, the workflow schema's enums, CLI
help, labels and colours of tables and figures, the dropout defaults, the layers that
gradient logging and layer statistics see) is derived from what is registered here
(GraphGym-style `register_*` functions). A plugin (`load_plugins`: a Python file or an
importable module, `lipnorm train --plugin`, the workflow's `plugins:`) registers its
own with the same functions, and nothing inside `src/lipnorm` needs an edit.

By concept: `entries` (what an entry is, its capability flags, the tables, lookups,
`resolve`), `register` (the `register_*` functions), `grammar` (model names: an
architecture, an attention normalisation and a representation normalisation composed as
`<architecture>[-lip][-<norm>]`: `compose_model`, `parse_model`, `model_parts`,
`model_names`), `labels` (labels and colours), `plugins` (`load_plugin`, `load_plugins`, `loaded_plugins`, `plugins_relative_to`),
`catalogue` (the entries as the docs' tables). This face is what users and plugins import.
None of it imports torch, numpy or another lipnorm module by an import statement: names,
labels and colours are plain data, the factories are callables that import torch inside
their bodies or `"module:attribute"` strings, resolved when a model is built.

lipnorm's own entries are registered here, on first import, by the packages that define
them, each found by name (`import_parts`): the architectures of `lipnorm.architectures`,
the representation normalisations of `lipnorm.normalisations`, the datasets of
`lipnorm.datasets` (one module each, or a family; each package's `ORDER` first, the
order of tables, palettes and schema enums), whose modules import nothing but this
registry at import. `BUILTIN_DATASETS` names lipnorm's own datasets.
"""

from lipnorm.registry.entries import (
    ARCHITECTURES, ATTENTION_NORMS, DATASET_OPTIONS, DATASETS, NAME_PATTERN, NO_NORM, NORMS, PARAMETER_GROUPS,
    RAW_KINDS, Architecture, Dataset, DatasetSizes, Factory, Norm, RawFiles, architecture, architecture_names,
    check_factory, check_new, dataset, dataset_names, norm, norm_names, plugin_hint, resolve,
)
from lipnorm.registry.grammar import compose_model, has_model, model_names, model_parts, parse_model
from lipnorm.registry.labels import (
    AXIS_COLOURS, AXIS_LABELS, NO_NORM_COLOUR, SPARE_COLOURS, colour, figure_palette, label, model_colour,
    model_label, names, palette,
)
from lipnorm.registry.plugins import import_parts, load_plugin, load_plugins, loaded_plugins, plugins_relative_to
from lipnorm.registry.register import register_architecture, register_dataset, register_norm, unregister

# lipnorm's own entries, registered once, each in the module that defines it: the
# architectures, then the normalisations, then the datasets.
import_parts("lipnorm.architectures")
import_parts("lipnorm.normalisations")
import_parts("lipnorm.datasets")
# lipnorm's own datasets (`lipnorm.data.DATASETS`): those registered so far, before any plugin.
BUILTIN_DATASETS = tuple(DATASETS)

__all__ = [
    "ARCHITECTURES", "ATTENTION_NORMS", "BUILTIN_DATASETS", "DATASET_OPTIONS", "DATASETS", "NAME_PATTERN", "NO_NORM",
    "NORMS", "PARAMETER_GROUPS", "RAW_KINDS", "Architecture", "Dataset", "DatasetSizes", "Factory", "Norm", "RawFiles",
    "architecture",
    "architecture_names", "check_factory", "check_new", "dataset", "dataset_names", "norm", "norm_names",
    "plugin_hint", "resolve", "compose_model", "has_model", "model_names", "model_parts", "parse_model",
    "AXIS_COLOURS", "AXIS_LABELS", "NO_NORM_COLOUR", "SPARE_COLOURS", "colour", "figure_palette", "label",
    "model_colour", "model_label", "names", "palette", "import_parts", "load_plugin", "load_plugins", "loaded_plugins", "plugins_relative_to",
    "register_architecture", "register_dataset", "register_norm", "unregister",
]
