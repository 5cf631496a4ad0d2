"""Initialisations of the PyG code that the authors' and the literature's networks use."""

from __future__ import annotations

import math

import torch


def pyg_glorot_(tensor: torch.Tensor) -> torch.Tensor:
    """PyG's `glorot` (torch_geometric/nn/inits.py), in place: uniform on
    ``[-b, b]``, ``b = sqrt(6 / (size(-2) + size(-1)))``, over the last two dimensions
    of the tensor as it is stored. Not torch's `xavier_uniform_`, whose fans of a 3-d
    tensor such as an ``(1, H, D)`` attention vector differ."""
    bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    with torch.no_grad():
        return tensor.uniform_(-bound, bound)


def pyg13_attention_glorot_(attn: torch.Tensor) -> torch.Tensor:
    """PyG 1.3's GATConv initialisation of one attention half, in place.

    PyG 1.3.2 (the version DGN's and DeCorr's code pins) keeps one attention vector
    ``att`` of shape ``(1, H, 2 D)`` for the pair ``[W h_i; W h_j]`` and draws it with
    `glorot` over its last two dimensions: uniform on ``[-b, b]``, ``b = sqrt(6 / (H +
    2 D))``. Our ``attn_r``/``attn_l`` ``(1, H, D)`` are its two halves, so each is drawn
    with that bound (not ``sqrt(6 / (H + D))``, which `pyg_glorot_` on a half would give).
    """
    heads, out_feats = attn.shape[-2:]
    bound = math.sqrt(6.0 / (heads + 2 * out_feats))
    with torch.no_grad():
        return attn.uniform_(-bound, bound)
