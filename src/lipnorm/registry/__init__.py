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
`builtin` (lipnorm's own entries). This face is what users and plugins import. None of it imports torch, numpy or
another lipnorm module by an import statement: names, labels and colours are plain data, the factories are
`"module:attribute"` strings (or callables, for plugins) resolved when a model is built, and
lipnorm's own datasets are found by name in `lipnorm.datasets` (`import_parts`), whose modules
import nothing but this registry at import.
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
from lipnorm.registry import builtin  # noqa: E402  lipnorm's own entries, registered once
from lipnorm.registry.builtin import BUILTIN_DATASETS  # noqa: E402

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
