"""Layer numbering for gradient logging: a model's `numbered_layers()`, and the gradient
groups and graph layers read from it (`gradient_groups`, `attention_layers`).

- deep models: 0 = input Linear (kind "input"), 1..L = attention (graph) layers
  ("attention"), L+1 = output Linear ("output");
- gat-classic: 0..L-2 = hidden attention layers ("attention"), L-1 = output attention
  layer ("output"); it has no Linear layers.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import nn

from lipnorm import registry

GROUPS = (*registry.PARAMETER_GROUPS, "all")


class NumberedLayer(NamedTuple):
    """One layer of a model as gradient logging sees it."""

    index: int
    kind: str  # input | attention | output
    module: nn.Module
    norm: nn.Module | None  # the representation normalisation applied after it, if any
    graph_layer: bool = False  # a message-passing layer: its outputs are logged


def _numbered_layers(model: nn.Module) -> list[NumberedLayer]:
    if not hasattr(model, "numbered_layers"):
        raise ValueError(
            f"{type(model).__name__} has no numbered layers; allowed: DeepGAT, DeepGT, ClassicGAT, "
            "DeepNet, or a registered model with numbered_layers()"
        )
    return model.numbered_layers()


def _group_of(
    name: str, declared: dict[str, str] | None = None, in_linear: bool = False, architecture: str | None = None
) -> str:
    """Gradient group of a parameter of an attention layer or Linear, by its name there.

    `declared` (a registered architecture's `parameter_groups`) first: a parameter's
    name, or a prefix ending in `.`, mapped to its group. Then the rules: the residual
    (GAT `res_fc`) or skip (GT `fc_skip`) projection is one group, bias included; the
    other biases form `bias`, projection weights (GAT `fc`, GT `fc_q`/`fc_k`/`fc_v`, a
    Linear's `weight`) form `fc`. Then the default: the weight of any `nn.Linear`
    (`in_linear`; a wrapped layer's MLP, e.g. `dgl.nn.GINConv`'s `apply_func.0.weight`)
    is `fc`. Anything else is a ValueError showing the registration that places it.
    """
    for key, group in (declared or {}).items():
        if name == key or (key.endswith(".") and name.startswith(key)):
            return group
    if name.startswith(("res_fc.", "fc_skip.")):
        return "res"
    if name in ("attn_l", "attn_r"):
        return "attn"
    if name == "bias" or name.endswith(".bias"):
        return "bias"
    if name == "weight" or (name.startswith("fc") and name.endswith(".weight")) or in_linear:
        return "fc"
    # The fix places the parameter's top-level submodule (a prefix), or the name itself.
    key = name.split(".", 1)[0] + "." if "." in name else name
    raise ValueError(
        f"parameter {name!r} has no gradient group (lipnorm's rules place res_fc.*, fc_skip.*, attn_l, "
        "attn_r, *bias, fc*.weight and any nn.Linear's weight); place it when registering: "
        f"register_architecture({architecture or 'NAME'!r}, ..., parameter_groups={{{key!r}: GROUP}}), "
        f"GROUP one of {', '.join(registry.PARAMETER_GROUPS)} (docs/models.md)"
    )


def _linear_parameter_names(module: nn.Module) -> set[str]:
    """The names (in `module`) of the parameters that belong to an `nn.Linear`."""
    return {
        f"{prefix}.{name}" if prefix else name
        for prefix, sub in module.named_modules()
        if isinstance(sub, nn.Linear)
        for name, _ in sub.named_parameters(recurse=False)
    }


def gradient_groups(model: nn.Module) -> list[tuple[int, str, str, list[nn.Parameter]]]:
    """`(layer_index, kind, group, params)` for every layer and every non-empty group.

    Groups are `fc`, `attn`, `bias`, `res`, `norm` (the normalisation's parameters) and
    `all` (every parameter of the layer, its normalisation included); the others
    partition `all`.
    """
    entries = []
    covered: set[int] = set()
    declared = getattr(model, "parameter_groups", None)
    architecture = getattr(model, "architecture", None)
    for layer in _numbered_layers(model):
        groups: dict[str, list[nn.Parameter]] = {group: [] for group in GROUPS}
        linear = _linear_parameter_names(layer.module)
        for name, param in layer.module.named_parameters():
            groups[_group_of(name, declared, name in linear, architecture)].append(param)
        if layer.norm is not None:
            groups["norm"].extend(layer.norm.parameters())
        groups["all"] = [param for group in GROUPS[:-1] for param in groups[group]]
        covered.update(id(param) for param in groups["all"])
        entries.extend(
            (layer.index, layer.kind, group, params) for group, params in groups.items() if params
        )
    missing = [name for name, param in model.named_parameters() if id(param) not in covered]
    if missing:
        raise ValueError(f"parameters outside every numbered layer: {', '.join(missing)}")
    return entries


def attention_layers(model: nn.Module) -> list[tuple[int, nn.Module]]:
    """`(layer_index, module)` of every graph (attention) layer (gat-classic's output
    layer too), the layers `numbered_layers` marks `graph_layer`.

    A forward hook on the module sees the layer's output `(N, H, D)` (or `(N, W)`),
    before ELU and normalisation. A model none of whose layers is marked is a
    ValueError: its logging would record nothing.
    """
    layers = [(layer.index, layer.module) for layer in _numbered_layers(model) if layer.graph_layer]
    if not layers:
        raise ValueError(
            f"{type(model).__name__}.numbered_layers() marks no layer graph_layer=True: "
            "output norms and layer statistics would record nothing"
        )
    return layers


def returns_attention(model: nn.Module) -> bool:
    """Whether the model's graph layers return `(output, attention)` with
    `get_attention=True` (its architecture's `attention`; lipnorm's models do)."""
    return getattr(model, "returns_attention", True)
