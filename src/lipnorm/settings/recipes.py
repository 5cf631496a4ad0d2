"""Training recipes: the defaults of the recipe-dependent settings.

Torch-free, so that the workflow (`lipnorm.plan` at Snakemake's parse) and the CLI's
help read them without importing the training code.
"""

from __future__ import annotations

from typing import Any

# "lipnorm": this project's networks; "official": the authors' public DeepGAT; "dgn":
# the deep-GNN literature's GAT protocol (DGN's code, which DeCorr's follows); "snr":
# SNR's own protocol (github.com/jingbo02/PSNR-GNN), which shares no code with DGN's.
RECIPES = ("lipnorm", "official", "dgn", "snr")
# Whose features the missing-features setting may erase: "unlabelled", every node outside
# the training set (PairNorm's setting, DGN's and DeCorr's code); "evaluation", the
# validation and test nodes only (SNR's `main_transductive_mv.py`: ``x[val_mask] = 0;
# x[test_mask] = 0``), so that the unlabelled nodes outside both keep theirs.
MISSING_POOLS = ("unlabelled", "evaluation")

# The recipe-dependent settings: None in a TrainConfig means "the recipe's default".
LIPNORM_DEFAULTS = {
    "epochs": 200, "lr": 0.005, "weight_decay": 5e-4, "heads": 8, "hidden": 8,
    "protocol": "best-val", "variant": "paper", "batchnorm_momentum": 0.1, "dgn_skip_weight": 0.01,
    "missing_pool": "unlabelled",
}
# The authors' parser.py defaults (lr 0.01, weight decay 5e-4, 8 heads, hidden 64),
# the scheduler and last-epoch test accuracy of train_deepgat_missing.py, the normaliser
# of normalizations/lipschitznorm.py; epochs from `official_epochs`.
OFFICIAL_DEFAULTS = {
    "lr": 0.01, "weight_decay": 5e-4, "heads": 8, "hidden": 64,
    "protocol": "official", "variant": "official", "batchnorm_momentum": 0.1, "dgn_skip_weight": 0.01,
    "missing_pool": "unlabelled",
}
# DGN's `options/base_options.py` (github.com/Kaixiong-Zhou/DGN; DeCorr's is the same):
# 1000 epochs, Adam lr 0.005, weight decay 5e-4, hidden 16, one head, dropout 0.6 on the
# features (of the first and last layer) and the attention, BatchNorm momentum
# 0.3, the model saved at each new best validation accuracy and tested (protocol
# best-val, no early stopping); `DGN_DATASET_DEFAULTS` replaces lr and weight decay per
# dataset as their `reset_model_parameter` does.
DGN_DEFAULTS = {
    "epochs": 1000, "lr": 0.005, "weight_decay": 5e-4, "heads": 1, "hidden": 16,
    "feat_drop": 0.6, "attn_drop": 0.6, "protocol": "best-val", "variant": "paper", "batchnorm_momentum": 0.3,
    "missing_pool": "unlabelled",
}
DGN_DATASET_DEFAULTS = {
    "cora": {"lr": 0.005, "weight_decay": 5e-4},
    "citeseer": {"lr": 0.005, "weight_decay": 5e-5},
    "pubmed": {"lr": 0.01, "weight_decay": 1e-3},
    "coauthor-cs": {"lr": 0.005, "weight_decay": 5e-5},
}
# SNR's missing-vector experiment (github.com/jingbo02/PSNR-GNN at 93e4e0d:
# `run_transductive_mv.py`, `main_transductive_mv.py`, `psnrgnn/models/gat.py`): Adam,
# weight decay 5e-4, lr swept over {1e-2, 1e-3} (1e-2 here; the sweep is two arms of a
# preset), 1000 epochs without early stopping (`if_early_stop: False`), one head of
# hidden 32, dropout 0.5 before every layer (`drop: [0.5, 0]`), no attention dropout
# (DGL's GATConv default), the test accuracy at the first epoch of the best validation
# accuracy, the features of the validation and test nodes erased.
SNR_DEFAULTS = {
    "epochs": 1000, "lr": 0.01, "weight_decay": 5e-4, "heads": 1, "hidden": 32,
    "feat_drop": 0.5, "attn_drop": 0.0, "protocol": "best-val", "variant": "paper",
    "batchnorm_momentum": 0.1, "dgn_skip_weight": 0.01, "missing_pool": "evaluation",
}
# DGN's lambda (`skip_weight`) for GAT, from their `reset_weight`: with 100 % missing
# features one value per dataset; with none, (lambda below 6 layers, from 6 layers on).
# Other datasets and missing rates keep their parser's default, 0.005.
DGN_SKIP_WEIGHT_MISSING = {"cora": 0.01, "citeseer": 0.01, "pubmed": 0.03, "coauthor-cs": 0.03}
DGN_SKIP_WEIGHT_COMPLETE = {
    "cora": (0.001, 0.01), "citeseer": (0.001, 0.005), "pubmed": (0.005, 0.01), "coauthor-cs": (0.001, 0.03),
}
DGN_SKIP_WEIGHT_DEFAULT = 0.005


def official_epochs(depth: int) -> int:
    """Epochs of the authors' launcher (`launch_batch_xps.py`) for a network of `depth`
    attention layers: it launches a (num_layers, nepoch) combination only if nepoch is
    1000 for num_layers <= 4, 1500 for 4 < num_layers < 8 and 2500 for num_layers >= 8."""
    if depth <= 4:
        return 1000
    if depth < 8:
        return 1500
    return 2500


def dgn_skip_weight(dataset: str, depth: int, missing_rate: float) -> float:
    """DGN's lambda for GAT on `dataset` at `depth` layers with `missing_rate` % of the
    non-training nodes' features erased (their `reset_weight`)."""
    if missing_rate == 100 and dataset in DGN_SKIP_WEIGHT_MISSING:
        return DGN_SKIP_WEIGHT_MISSING[dataset]
    if missing_rate == 0 and dataset in DGN_SKIP_WEIGHT_COMPLETE:
        shallow, deep = DGN_SKIP_WEIGHT_COMPLETE[dataset]
        return shallow if depth < 6 else deep
    return DGN_SKIP_WEIGHT_DEFAULT


def recipe_defaults(recipe: str, depth: int, dataset: str = "cora", missing_rate: float = 0.0) -> dict[str, Any]:
    """The value each recipe-dependent setting takes when it is not given; the "dgn"
    recipe's depend on the dataset and the missing rate (percent) too."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; allowed: {', '.join(RECIPES)}")
    if recipe == "lipnorm":
        return dict(LIPNORM_DEFAULTS)
    if recipe == "snr":
        return dict(SNR_DEFAULTS)
    if recipe == "dgn":
        return {
            **DGN_DEFAULTS, **DGN_DATASET_DEFAULTS.get(dataset, {}),
            "dgn_skip_weight": dgn_skip_weight(dataset, depth, missing_rate),
        }
    return {"epochs": official_epochs(depth), **OFFICIAL_DEFAULTS}
