"""Registration: `register_architecture`, `register_norm` and `register_dataset` check
an entry (its name, its factories, its capability flags) and add it to the tables of
`lipnorm.registry.entries`, refusing one whose name would make a model name of the
grammar (`lipnorm.registry.grammar`) mean two models; `unregister` removes one (tests).
lipnorm's own entries are registered so, each in its module (`lipnorm.architectures`,
`lipnorm.normalisations`, `lipnorm.datasets`), and a plugin's.
"""

from __future__ import annotations

import warnings
from typing import Mapping

from lipnorm.registry import grammar
from lipnorm.registry.entries import (
    ARCHITECTURES,
    DATASET_OPTIONS,
    DATASETS,
    NORMS,
    PARAMETER_GROUPS,
    Architecture,
    Dataset,
    DatasetSizes,
    Factory,
    Norm,
    RawFiles,
    check_factory,
    check_new,
)


def register_architecture(
    name: str,
    *,
    label: str,
    colour: str,
    layer: Factory | None = None,
    model: Factory | None = None,
    lip: bool = False,
    lip_colour: str | None = None,
    norms: bool = True,
    attention: bool = True,
    dropout: tuple[float, float] = (0.6, 0.3),
    parameter_groups: Mapping[str, str] | None = None,
    projections: int = 1,
    seed_batch: Factory | None = None,
    seed_batch_check: Factory | None = None,
    checkpointable: bool | None = None,
    full_batch_only: bool = False,
    seeds_together: Factory | None = None,
    seeds_together_check: Factory | None = None,
) -> Architecture:
    """Register a network under `name`; returns its entry.

    Give exactly one of:

    - `layer`: ``layer(in_feats, out_feats, heads, **options) -> nn.Module``, one graph
      layer whose ``forward(graph, h)`` returns ``(N, heads, out_feats)`` or
      ``(N, heads * out_feats)``; options are `attention_norm` (``"none"``, or ``"lip"``
      when `lip`), `residual`, `alpha`, `variant` and `attn_drop`. lipnorm stacks
      `depth` of them as its deep models do (`lipnorm.nn.models.deep.DeepNet`): input
      Linear, [dropout, layer, ELU (not after the last), normalisation] per layer,
      output Linear.
    - `model`: ``model(config: ModelConfig) -> nn.Module`` with ``forward(graph, feat)
      -> logits`` and ``numbered_layers()`` (see `lipnorm.nn.models.numbering.NumberedLayer`).

    `lip`: whether the layer takes ``attention_norm="lip"`` (then `lip_colour` colours
    the LipschitzNorm variant); `norms`: whether representation normalisations apply
    after its layers; `attention`: whether its layers return ``(output, attention
    (E, H, 1))`` when called with ``get_attention=True`` (layer statistics then include
    the attention entropy); `dropout`: default (feature, attention) dropout;
    `parameter_groups`: gradient group (one of `PARAMETER_GROUPS`) of a layer parameter
    by its name in the layer, or by a prefix ending in ``.``, for names lipnorm's own
    rules (`lipnorm.nn.models.numbering._group_of`; an ``nn.Linear``'s weight is ``fc``) do not place, e.g. ``{"attn": "attn"}`` for
    DGL's GATv2Conv; `projections`: how many (N, heads * out_feats) projections of its
    input a layer computes (GAT's one, the graph transformer's query, key, value and skip
    four), which `lipnorm plan` counts in a run's memory.

    `seed_batch` (optional): ``seed_batch(models) -> nn.Module``, the networks of
    S seeds of one configuration as one network, which `lipnorm train --seeds`
    (`lipnorm.train.seed_batch`) trains in their place; a ValueError saying why, for models it
    cannot hold. Its contract is `lipnorm.nn.models.seed_batch.SeedBatchedGAT`'s: ``forward(graph,
    feat, kept=None) -> (S, N, C)`` (``kept``: ``(E, S)`` bool, the edges each seed's
    DropEdge kept), ``layers`` (the attention layers, outputs ``(N, S * H, D)``),
    ``generators`` and ``set_generators`` (each seed's dropout stream), ``seed_views``
    and ``seed_state_dict``. Without it (the default), a group's seeds are trained one
    after another in one process, and their logs say so. `seed_batch_check`
    (optional, with `seed_batch`): ``check(config: ModelConfig) -> str | None``, why
    `seed_batch` cannot hold the networks of these (resolved) settings, None where it
    can; it must import no torch, as the workflow groups a run's seeds by it at every
    Snakemake start without building a network (`lipnorm.train.seed_batch_plan`). Without it,
    the workflow takes every configuration as one `seed_batch` holds; a job whose
    networks it refuses trains its seeds one after another.

    What its runs may take, read by training and by `lipnorm plan` (which offers a job
    over its memory limit checkpointing, then cluster batches, where allowed):

    - `checkpointable`: activation checkpointing (``checkpoint=True``, `lipnorm train
      --checkpoint`). None (the default) means True for a `layer` architecture, whose
      stack (`lipnorm.nn.models.deep.DeepNet`) checkpoints its blocks, and False for a `model`
      one. A `model` factory that declares it builds, when ``config.checkpoint``, a
      network that recomputes its blocks in the backward pass (`torch.utils.checkpoint`,
      as `lipnorm.nn.models.deep.DeepGAT` does) and says so with a true ``checkpoint``
      attribute, which `lipnorm.nn.models.build.build_model` checks.
    - `full_batch_only`: True refuses cluster batches (``batching="cluster"``, `lipnorm
      train --batching cluster`): the network is trained on the whole graph only (as the
      published two-layer `gat-classic`). Default False: any network's ``forward(graph,
      feat)`` takes a batch's subgraph as it takes the whole graph.

    `seeds_together` and `seeds_together_check`: the deprecated spellings of `seed_batch`
    and `seed_batch_check` (their names up to lipnorm 0.2.0); either warns (`DeprecationWarning`) naming the new.
    """
    check_new("architecture", name, ARCHITECTURES)
    seed_batch = _renamed(name, "seeds_together", seeds_together, "seed_batch", seed_batch)
    seed_batch_check = _renamed(name, "seeds_together_check", seeds_together_check, "seed_batch_check", seed_batch_check)
    if isinstance(projections, bool) or not isinstance(projections, int) or projections < 1:
        raise ValueError(f"architecture {name!r}: projections must be a positive integer, got {projections!r}")
    if (layer is None) == (model is None):
        raise ValueError(f"architecture {name!r}: give exactly one of layer= and model=")
    check_factory("architecture", name, "layer" if layer is not None else "model", layer or model)
    if seed_batch is not None:
        check_factory("architecture", name, "seed_batch", seed_batch)
    if seed_batch_check is not None:
        if seed_batch is None:
            raise ValueError(f"architecture {name!r}: seed_batch_check needs seed_batch (the network it checks for)")
        check_factory("architecture", name, "seed_batch_check", seed_batch_check)
    if lip and lip_colour is None:
        raise ValueError(f"architecture {name!r}: lip=True needs lip_colour (its LipschitzNorm variant's colour)")
    groups = dict(parameter_groups or {})
    bad = {key: group for key, group in groups.items() if group not in PARAMETER_GROUPS}
    if bad:
        raise ValueError(
            f"architecture {name!r}: unknown gradient group(s) {bad}; allowed: {', '.join(PARAMETER_GROUPS)}"
        )
    feat_drop, attn_drop = dropout
    for what, value in (("feature", feat_drop), ("attention", attn_drop)):
        if not 0 <= value < 1:
            raise ValueError(f"architecture {name!r}: {what} dropout must be in [0, 1), got {value!r}")
    entry = Architecture(
        name, label, colour, lip_colour if lip else None, layer, model, bool(lip), bool(norms),
        bool(attention), (float(feat_drop), float(attn_drop)), groups, projections, seed_batch,
        seed_batch_check,
        checkpointable=layer is not None if checkpointable is None else bool(checkpointable),
        full_batch_only=bool(full_batch_only),
    )
    return _add(ARCHITECTURES, entry)


def _renamed(name: str, old: str, old_value: Factory | None, new: str, new_value: Factory | None) -> Factory | None:
    """`new_value`, or `old_value` given under `old`, the deprecated spelling of `new`
    (with a `DeprecationWarning` naming `new`); both given is a ValueError."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ValueError(f"architecture {name!r}: give {new}= alone ({old}= is its deprecated spelling)")
    warnings.warn(f"register_architecture({old}=...) is deprecated: use {new}=...", DeprecationWarning, stacklevel=3)
    return old_value


def register_norm(
    name: str, *, label: str, colour: str, lip_colour: str, factory: Factory, attribute: str = "norms"
) -> Norm:
    """Register a representation normalisation applied after each layer.

    ``factory(width, config: ModelConfig) -> nn.Module`` with ``forward(graph, h (N, W))
    -> (N, W)``; one is built per layer. `lip_colour` colours its combination with
    LipschitzNorm; `attribute` is the deep model's attribute holding the per-layer
    modules (their state-dict prefix).
    """
    check_new("norm", name, NORMS)
    check_factory("norm", name, "factory", factory)
    return _add(NORMS, Norm(name, label, colour, lip_colour, factory, attribute))


def register_dataset(
    name: str,
    *,
    label: str,
    colour: str,
    load: Factory | None = None,
    sizes: DatasetSizes | None = None,
    read: Factory | None = None,
    raw: RawFiles | None = None,
    options: tuple[str, ...] = (),
) -> Dataset:
    """Register a dataset, with one of `load` (a plugin's form) and `read` (lipnorm's own).

    `load() -> mapping` with keys `graph` (a DGLGraph), `features` `(N, F)`, `labels`
    `(N,)` integer classes, `train_mask`, `val_mask`, `test_mask` (bool `(N,)`), and
    optionally `num_classes` (default: max label + 1); lipnorm builds and checks the
    `NodeDataset` (`lipnorm.data.dataset.dataset_from_parts`).

    `read(folder, **options) -> NodeDataset` builds the dataset itself: `folder` is the
    verified folder of its `raw` files (`RawFiles`: where `lipnorm.data` fetches them
    from, which files, their pinned sums), fetched first if absent; without `raw` (a
    generated graph) it is called with the options alone. `options` names the
    `lipnorm.data.load_dataset` options it takes (of `DATASET_OPTIONS`: `raw_features`,
    `csbm`), passed as keywords; giving one to a dataset that does not take it is an error.

    `sizes` (optional, `DatasetSizes`) lets `lipnorm.plan` estimate a run without loading
    the data; without it the plan loads the dataset once to count them."""
    check_new("dataset", name, DATASETS)
    if sizes is not None and not isinstance(sizes, DatasetSizes):
        raise ValueError(f"dataset {name!r}: sizes must be a lipnorm.registry.DatasetSizes, got {sizes!r}")
    if load is None and read is None:
        raise ValueError(f"dataset {name!r}: give load= (a function returning the graph, features, labels and masks)")
    if load is not None and read is not None:
        raise ValueError(f"dataset {name!r}: give one of load= and read=")
    if load is not None:
        check_factory("dataset", name, "load", load)
        if raw is not None or options:
            raise ValueError(f"dataset {name!r}: raw= and options= go with read=, not load=")
    else:
        check_factory("dataset", name, "read", read)
    if raw is not None and not isinstance(raw, RawFiles):
        raise ValueError(f"dataset {name!r}: raw must be a lipnorm.registry.RawFiles, got {raw!r}")
    options = (options,) if isinstance(options, str) else tuple(options)
    unknown_options = [option for option in options if option not in DATASET_OPTIONS]
    if unknown_options:
        raise ValueError(
            f"dataset {name!r}: unknown option(s) {', '.join(map(repr, unknown_options))}; "
            f"allowed: {', '.join(DATASET_OPTIONS)}"
        )
    return _add(DATASETS, Dataset(name, label, colour, load, sizes, read, raw, options))


def _add(registered: dict, entry):
    registered[entry.name] = entry
    try:
        grammar.refresh()  # a new name must not compose to one that exists
    except ValueError:
        del registered[entry.name]
        grammar.forget()
        raise
    return entry


def unregister(kind: str, name: str) -> None:
    """Remove a registered `kind` ("architecture", "norm", "dataset") entry (tests)."""
    registered = {"architecture": ARCHITECTURES, "norm": NORMS, "dataset": DATASETS}[kind]
    if name not in registered:
        raise ValueError(f"no {kind} {name!r} is registered")
    del registered[name]
    grammar.forget()
