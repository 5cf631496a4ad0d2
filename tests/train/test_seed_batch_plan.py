"""Which runs' seeds train together, decided from their settings alone
(`lipnorm.train.seed_batch_plan`, the registry's `seed_batch_check`): the same decision as
building the networks and asking `seed_batch`, without importing torch."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import lipnorm
from lipnorm import grid, registry
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.seed_batch import SeedBatchedGAT
from lipnorm.plan.workflow import read_config
from lipnorm.settings.train_config import TrainConfig
from lipnorm.train import seed_batch_plan

SRC = Path(lipnorm.__file__).resolve().parents[1]
PRESETS = sorted((SRC.parent / "config" / "presets").glob("*.yaml")) + [SRC.parent / "config.yaml"]


def network_reason(config: TrainConfig) -> str | None:
    """The reference: why `seed_batch` refuses two networks of `config` (resolved),
    built on 4 features and 2 classes (what the workflow asked before it was torch-free)."""
    reason = seed_batch_plan.settings_reason(config)
    if reason is not None:
        return reason
    with torch.random.fork_rng(devices=[]):
        models = [build_model(config.model_config(4, 2).resolved()) for _ in range(2)]
    try:
        registry.resolve(registry.architecture(config.architecture).seed_batch)(models)
    except ValueError as err:
        return str(err)
    return None


GAT_SETTINGS = [
    dict(recipe=recipe, model=model, variant=variant, depth=depth)
    for recipe, model, variant, depth in itertools.product(
        ("dgn", "lipnorm", "official"),
        ("gat", "gat-lip", "gat-pairnorm", "gat-lip-pairnorm", "gat-batchnorm", "gat-lip-dgn"),
        ("paper", "official"),
        (1, 3),
    )
    if recipe != "official" or model in ("gat", "gat-lip", "gat-pairnorm")
] + [  # SNR's GAT takes no representation normalisation
    dict(recipe="snr", model=model, variant=variant, depth=depth, heads=heads)
    for model, variant, depth, heads in itertools.product(("gat", "gat-lip"), ("paper", "official"), (1, 3), (1, 2))
]


@pytest.mark.parametrize("settings", GAT_SETTINGS, ids=lambda s: "-".join(map(str, s.values())))
def test_the_settings_decide_as_the_networks_do(settings):
    config = TrainConfig(**settings).resolved()
    assert (seed_batch_plan.why_not_seed_batched(config) is None) is (network_reason(config) is None)


def test_the_literature_and_snr_gats_are_the_ones_grouped_and_reasons_name_the_setting():
    assert seed_batch_plan.why_not_seed_batched(TrainConfig(recipe="dgn", model="gat-lip-batchnorm").resolved()) is None
    assert seed_batch_plan.why_not_seed_batched(TrainConfig(recipe="snr", model="gat-lip", residual=True).resolved()) is None
    assert seed_batch_plan.why_not_seed_batched(TrainConfig(recipe="lipnorm").resolved()) == (
        "recipe 'lipnorm' builds neither the literature GAT (recipe dgn) nor SNR's GAT (recipe snr), "
        "the networks batched over seeds"
    )
    assert seed_batch_plan.why_not_seed_batched(TrainConfig(recipe="snr", model="gat-lip", variant="official").resolved()) == (
        "LipschitzNorm's official variant takes one norm over all heads, which would mix the seeds"
    )
    assert seed_batch_plan.why_not_seed_batched(TrainConfig(recipe="dgn", model="gat-lip", variant="official").resolved()) == (
        "LipschitzNorm's official variant takes one norm over all heads, which would mix the seeds"
    )
    assert seed_batch_plan.why_not_seed_batched(TrainConfig(recipe="dgn", patience=5).resolved()) == (
        "patience 5: each seed would stop at its own epoch"
    )


@pytest.mark.parametrize("preset", PRESETS, ids=lambda path: path.stem)
@pytest.mark.parametrize("grouping", ["together", "all"])
def test_every_preset_groups_the_runs_it_grouped_by_building_networks(preset, grouping, monkeypatch):
    config = {**read_config(preset), "seed_groups": grouping}
    groups = seed_batch_plan.workflow_seed_groups(config)
    monkeypatch.setattr(seed_batch_plan, "why_not_seed_batched", network_reason)  # as it decided before
    assert groups == seed_batch_plan.workflow_seed_groups(config)


def test_the_literature_grid_groups_its_seeds():
    seeds, groups = seed_batch_plan.workflow_seed_groups(read_config(SRC.parent / "config" / "presets" / "literature-cora.yaml"))
    assert seeds == (0, 1, 2, 3, 4)
    assert groups == [f"remedies/{arm}" for arm in
                      ("none", "batchnorm", "pairnorm", "dgn", "dropedge", "residual", "initial-residual")]


def test_the_snr_secondary_grid_groups_its_seeds():
    """SNR's protocol's secondary family: each run's ten seeds one job, one network."""
    for rate in ("0.01", "0.001"):
        config = read_config(SRC.parent / "config" / "presets" / f"snr-secondary-lr{rate}.yaml")
        assert seed_batch_plan.workflow_seed_groups(config) == (tuple(range(10)), ["remedies/residual"])


def test_the_workflows_parsing_imports_no_torch():
    """What common.smk computes at parse, for the literature grid (seeds grouped) and the
    default config: the seed groups, the plan, the run groups."""
    code = (
        "import sys; from lipnorm import experiments, grid, plan, registry, yaml_numbers;"
        "from lipnorm.train import seed_batch_plan; from lipnorm.results.aggregate import AGGREGATE_TABLES;"
        "from lipnorm.plan.workflow import read_config;"
        "configs = [read_config(path) for path in sys.argv[1:]];"
        "[(seed_batch_plan.workflow_seed_groups(c), plan.plan_workflow(c, plan.load_coefficients()), grid.run_groups(c['experiments'])) for c in configs];"
        "print(sorted({'torch', 'dgl'} & set(sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    paths = [str(SRC.parent / "config" / "presets" / "literature-cora.yaml"), str(SRC.parent / "config.yaml")]
    done = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, env=env, cwd=SRC.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_plugins_check_decides_and_without_one_every_run_is_grouped():
    def only_two_heads(config):
        return None if config.heads == 2 else f"heads {config.heads}: only 2 are batched"

    try:
        registry.register_architecture(
            "test-checked", label="Checked", colour="#000000", layer="torch.nn:Identity",
            seed_batch="torch.nn:Identity", seed_batch_check=only_two_heads,
        )
        registry.register_architecture(
            "test-unchecked", label="Unchecked", colour="#000000", layer="torch.nn:Identity",
            seed_batch="torch.nn:Identity",
        )
        assert seed_batch_plan.why_not_seed_batched(TrainConfig(model="test-checked", heads=2).resolved()) is None
        assert seed_batch_plan.why_not_seed_batched(TrainConfig(model="test-checked", heads=3).resolved()) == (
            "heads 3: only 2 are batched"
        )
        assert seed_batch_plan.why_not_seed_batched(TrainConfig(model="test-unchecked").resolved()) is None
    finally:
        registry.unregister("architecture", "test-checked")
        registry.unregister("architecture", "test-unchecked")


def test_a_check_without_a_network_is_refused():
    with pytest.raises(ValueError, match="^architecture 'test-lone': seed_batch_check needs seed_batch"):
        registry.register_architecture(
            "test-lone", label="Lone", colour="#000000", layer="torch.nn:Identity", seed_batch_check=len,
        )
    assert "test-lone" not in registry.architecture_names()


def test_the_old_keywords_seeds_together_warn_naming_seed_batch_and_still_register():
    def check(config):
        return None

    try:
        with pytest.warns(DeprecationWarning) as caught:
            entry = registry.register_architecture(
                "test-old", label="Old", colour="#000000", layer="torch.nn:Identity",
                seeds_together="torch.nn:Identity", seeds_together_check=check,
            )
        assert [str(w.message) for w in caught] == [
            "register_architecture(seeds_together=...) is deprecated: use seed_batch=...",
            "register_architecture(seeds_together_check=...) is deprecated: use seed_batch_check=...",
        ]
        assert all(w.filename == __file__ for w in caught)  # pointed at the caller
        assert (entry.seed_batch, entry.seed_batch_check) == ("torch.nn:Identity", check)
        with pytest.warns(DeprecationWarning, match=r"Architecture\.seeds_together is deprecated: use Architecture\.seed_batch$"):
            assert entry.seeds_together == "torch.nn:Identity"
        with pytest.warns(DeprecationWarning, match=r"use Architecture\.seed_batch_check$"):
            assert entry.seeds_together_check is check
        assert seed_batch_plan.why_not_seed_batched(TrainConfig(model="test-old").resolved()) is None
    finally:
        registry.unregister("architecture", "test-old")
    with pytest.raises(ValueError, match=r"^architecture 'test-both': give seed_batch= alone \(seeds_together= is its"):
        registry.register_architecture(
            "test-both", label="Both", colour="#000000", layer="torch.nn:Identity",
            seed_batch="torch.nn:Identity", seeds_together="torch.nn:Identity",
        )
    assert "test-both" not in registry.architecture_names()
