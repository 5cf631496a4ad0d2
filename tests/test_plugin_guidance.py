"""Plugins that explain themselves (issue 37, item 2): a wrapped DGL layer's parameters
placed or the fix shown, a grid that leaves out the combinations an architecture does
not have, an unknown name that points at plugins, `--help` after `--plugin`, the
subcommand's usage on an error, and one line per config problem."""

from __future__ import annotations

import re

import dgl
import pytest
import torch
from torch import nn

from lipnorm import registry
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.config import ModelConfig
from lipnorm.nn.models.numbering import gradient_groups


# --- a wrapped DGL layer's gradient groups ------------------------------------------------


def gin_layer(in_feats, out_feats, heads, *, learn_eps=False, **options):
    """dgl.nn.GINConv around a two-layer MLP, heads x out_feats wide."""
    mlp = nn.Sequential(nn.Linear(in_feats, heads * out_feats), nn.ReLU(), nn.Linear(heads * out_feats, heads * out_feats))
    return dgl.nn.GINConv(mlp, "sum", learn_eps=learn_eps)


class Scaled(nn.Module):
    """A Linear times a learnable scale: `scale` is no Linear's parameter."""

    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, h):
        return self.scale * self.linear(h)


@pytest.fixture
def gin():
    registry.register_architecture("test-gin", label="GIN", colour="#123456", layer=gin_layer, attention=False)
    yield
    registry.unregister("architecture", "test-gin")


def test_a_wrapped_dgl_layers_mlp_weights_are_fc_and_biases_bias(gin):
    net = build_model(ModelConfig(model="test-gin", in_feats=3, num_classes=2, depth=2, heads=1, hidden=4))
    groups = {(index, group): {id(p) for p in params} for index, _, group, params in gradient_groups(net)}
    for index, layer in enumerate(net.layers, start=1):
        mlp = layer.apply_func
        assert groups[index, "fc"] == {id(mlp[0].weight), id(mlp[2].weight)}
        assert groups[index, "bias"] == {id(mlp[0].bias), id(mlp[2].bias)}
        assert groups[index, "all"] == {id(p) for p in layer.parameters()}


@pytest.mark.parametrize(
    "layer, fix",
    [
        # GINConv's learnable epsilon: a parameter of the layer itself, placed by its name.
        (lambda i, o, h, **options: gin_layer(i, o, h, learn_eps=True), "parameter_groups={'eps': GROUP}"),
        # A parameter inside a submodule: placed by the submodule's prefix.
        (lambda i, o, h, **options: dgl.nn.GINConv(Scaled(i), "sum"), "parameter_groups={'apply_func.': GROUP}"),
    ],
)
def test_a_parameter_no_rule_places_is_an_error_showing_the_registration_that_does(layer, fix):
    registry.register_architecture("test-gin", label="GIN", colour="#123456", layer=layer, attention=False)
    try:
        net = build_model(ModelConfig(model="test-gin", in_feats=3, num_classes=2, depth=1, heads=1, hidden=3))
        name = "eps" if "eps" in fix else "apply_func.scale"
        message = (
            f"parameter '{name}' has no gradient group (lipnorm's rules place res_fc.*, fc_skip.*, attn_l, "
            "attn_r, *bias, fc*.weight and any nn.Linear's weight); place it when registering: "
            f"register_architecture('test-gin', ..., {fix}), GROUP one of fc, attn, bias, res, norm (docs/models.md)"
        )
        with pytest.raises(ValueError, match=re.escape(message)):
            gradient_groups(net)
    finally:
        registry.unregister("architecture", "test-gin")
