"""Activation checkpointing (`checkpoint=True`): the same numbers as the plain model,
every block recomputed once in the backward pass of a training step, never in eval."""

from __future__ import annotations

import json
from pathlib import Path

import dgl
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lipnorm import cli
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.numbering import attention_layers
from lipnorm.settings.model_config import ModelConfig
from lipnorm.train import TrainConfig
from lipnorm.train.hooks import GradientNorms, OutputNorms

NUM_NODES = 12
IN_FEATS = 7
NUM_CLASSES = 3
TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"
# Dropout on (the models' defaults: 0.6/0.3 GAT, 0.5/0.3 GT), as the recomputation must
# draw the same masks; gat-batchnorm: running statistics updated once per step.
MODELS = ["gat", "gat-lip", "gt-lip", "gat-lip-pairnorm", "gat-batchnorm"]


def small_graph() -> dgl.DGLGraph:
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(NUM_NODES, (30,), generator=generator)
    dst = torch.randint(NUM_NODES, (30,), generator=generator)
    return dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=NUM_NODES)))


def features() -> torch.Tensor:
    return torch.randn(NUM_NODES, IN_FEATS, generator=torch.Generator().manual_seed(1))


def make_model(model: str, checkpoint: bool, **settings) -> torch.nn.Module:
    torch.manual_seed(3)
    config = ModelConfig(
        model=model, in_feats=IN_FEATS, num_classes=NUM_CLASSES, depth=3, heads=2, hidden=4,
        checkpoint=checkpoint, **settings,
    )
    return build_model(config)


def train_steps(model: torch.nn.Module, steps: int = 3) -> dict[str, list]:
    """`steps` Adam steps as the trainer takes them; every number they produce."""
    graph, feat = small_graph(), features()
    labels = torch.arange(NUM_NODES) % NUM_CLASSES
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    gradient_norms, output_norms = GradientNorms(model), OutputNorms(model)
    record: dict[str, list] = {"loss": [], "grads": [], "grad_norms": [], "output_norms": [], "buffers": []}
    torch.manual_seed(7)
    for _ in range(steps):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        output_norms.norms.clear()
        output_norms.active = True
        logits = model(graph, feat)
        output_norms.active = False
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        record["loss"].append(loss.detach())
        record["grads"].append({name: param.grad.clone() for name, param in model.named_parameters()})
        record["grad_norms"].append(gradient_norms())
        record["output_norms"].append(torch.stack(output_norms.norms))
        optimizer.step()
        record["buffers"].append({name: buffer.clone() for name, buffer in model.named_buffers()})
    return record


def assert_identical(plain, checkpointed) -> None:
    if isinstance(plain, dict):
        assert plain.keys() == checkpointed.keys()
        for key in plain:
            assert_identical(plain[key], checkpointed[key])
    elif isinstance(plain, list):
        assert len(plain) == len(checkpointed)
        for a, b in zip(plain, checkpointed):
            assert_identical(a, b)
    else:
        assert torch.equal(plain, checkpointed), (plain, checkpointed)


@pytest.mark.parametrize("model", MODELS)
def test_training_steps_are_identical_with_and_without_checkpointing(model):
    plain = train_steps(make_model(model, checkpoint=False))
    checkpointed = train_steps(make_model(model, checkpoint=True))
    assert_identical(plain, checkpointed)
    # One output norm per attention layer per step: the recomputation records none.
    assert [len(norms) for norms in checkpointed["output_norms"]] == [3, 3, 3]
    # Dropout was on: a step without it gives another loss.
    no_dropout = train_steps(make_model(model, checkpoint=True, feat_drop=0.0, attn_drop=0.0), steps=1)
    assert not torch.equal(no_dropout["loss"][0], plain["loss"][0])


@pytest.mark.parametrize("model", ["gat-lip", "gt-lip"])
def test_initial_residual_is_identical_with_and_without_checkpointing(model):
    plain = train_steps(make_model(model, checkpoint=False, initial_residual=0.2), steps=2)
    checkpointed = train_steps(make_model(model, checkpoint=True, initial_residual=0.2), steps=2)
    assert_identical(plain, checkpointed)


def count_layer_calls(model: torch.nn.Module) -> list[int]:
    calls = [0] * len(attention_layers(model))
    for position, (_, layer) in enumerate(attention_layers(model)):
        layer.register_forward_hook(lambda *_, position=position: calls.__setitem__(position, calls[position] + 1))
    return calls


@pytest.mark.parametrize("checkpoint, per_step", [(True, [2, 2, 1]), (False, [1, 1, 1])])
def test_a_training_step_recomputes_every_layer_but_the_last_once_with_checkpointing(checkpoint, per_step):
    # The last block is not recomputed: the backward pass would start by recomputing it.
    model = make_model("gat-lip-pairnorm", checkpoint=checkpoint)
    calls = count_layer_calls(model)
    recomputing = []
    model.layers[0].register_forward_hook(lambda *_: recomputing.append(model.recomputing))
    model.layers[-1].register_forward_hook(lambda *_: recomputing.append(("last", model.recomputing)))
    model.train()
    model(small_graph(), features()).sum().backward()
    assert calls == per_step
    assert recomputing == [False, ("last", False), True][: per_step[0] + 1]
    assert model.recomputing is False


def test_evaluation_and_no_grad_do_not_checkpoint():
    model = make_model("gat-lip", checkpoint=True)
    calls = count_layer_calls(model)
    model.eval()
    with torch.no_grad():
        evaluated = model(small_graph(), features())
    model.train()
    with torch.no_grad():
        model(small_graph(), features())
    assert calls == [2, 2, 2]  # once per forward, no recomputation
    plain = make_model("gat-lip", checkpoint=False).eval()
    assert torch.equal(plain(small_graph(), features()), evaluated)


def test_batchnorm_running_statistics_are_updated_once_per_step():
    plain, checkpointed = (make_model("gat-batchnorm", checkpoint=flag) for flag in (False, True))
    for model in (plain, checkpointed):
        model.train()
        torch.manual_seed(0)
        model(small_graph(), features()).sum().backward()
    for (name, a), b in zip(plain.named_buffers(), checkpointed.buffers()):
        assert torch.equal(a, b), name
    assert int(checkpointed._norms()[0].bn.num_batches_tracked) == 1


def test_gat_classic_rejects_checkpointing_naming_the_model():
    config = ModelConfig(model="gat-classic", in_feats=IN_FEATS, num_classes=NUM_CLASSES, checkpoint=True)
    with pytest.raises(ValueError, match=(
        r"^checkpoint=True: model 'gat-classic' has no checkpointed blocks: architecture 'gat-classic' is not "
        r"registered with checkpointable=True \(those that are: gat, gt, gcn"
    )):
        build_model(config)
    with pytest.raises(ValueError, match="model 'gat-classic' has no checkpointed blocks"):
        TrainConfig(model="gat-classic", checkpoint=True).validate()


def test_checkpoint_must_be_a_bool():
    with pytest.raises(ValueError, match="checkpoint must be true or false, got 1"):
        TrainConfig(checkpoint=1).validate()


def read_frames(out: Path) -> dict[str, pd.DataFrame]:
    names = ("metrics", "gradnorms", "outnorms", "layerstats")
    return {name: pd.read_parquet(out / f"{name}.parquet").drop(columns="seconds", errors="ignore") for name in names}


@pytest.mark.parametrize("model", ["gat-lip-pairnorm", "gt-lip"])
def test_cli_runs_with_and_without_checkpoint_write_identical_files(tmp_path, model):
    common = [
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--model", model, "--depth", "3",
        "--heads", "2", "--hidden", "4", "--epochs", "3", "--grad-log-every", "1", "--seed", "4",
        "--data-root", str(tmp_path / "datasets"),
    ]
    assert cli.main([*common, "--out", str(tmp_path / "plain")]) == 0
    assert cli.main([*common, "--checkpoint", "--out", str(tmp_path / "checkpointed")]) == 0
    plain, checkpointed = read_frames(tmp_path / "plain"), read_frames(tmp_path / "checkpointed")
    for name in plain:
        assert len(plain[name]) > 0, name
        pd.testing.assert_frame_equal(plain[name], checkpointed[name], check_exact=True)
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("plain", "checkpointed")]
    assert [summary["config"]["checkpoint"] for summary in summaries] == [False, True]
    assert summaries[0]["test_metric"] == summaries[1]["test_metric"]

