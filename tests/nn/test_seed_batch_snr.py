"""Seeds of SNR's GAT trained together (`lipnorm.nn.models.seed_batch_snr.SeedBatchedSNR`,
the architecture "gat"'s `seed_batch` for recipe snr): S `SNRGAT`s of one configuration
as one network give each seed's separate forward and loss gradients, in training (each
seed's dropout from its own stream, as its separate run draws it) and evaluation."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.seed_batch import SeedBatchedGAT, seed_batched, why_not_seed_batched
from lipnorm.nn.models.seed_batch_snr import SeedBatchedSNR
from lipnorm.settings.model_config import ModelConfig
from tests.nn.test_models import IN_FEATS, NUM_CLASSES, NUM_NODES, features, small_graph
from tests.nn.test_seed_batch import LABELS, SEEDS, TRAIN_ROWS, separate_models, stream
from tests.tolerance import assert_within


def snr_config(**settings) -> ModelConfig:
    settings = {"model": "gat", "depth": 3, "heads": 1, "hidden": 5, "feat_drop": 0.5, "attn_drop": 0.0,
                "recipe": "snr", "residual": True, **settings}
    return ModelConfig(in_feats=IN_FEATS, num_classes=NUM_CLASSES, **settings)


CASES = {
    "plain": {},
    "lip": {"attention_norm": "lip"},
    "no-residual": {"residual": False},
    "two-heads": {"heads": 2},
    "lip-two-heads-no-residual": {"attention_norm": "lip", "heads": 2, "residual": False},
    "depth-1": {"depth": 1},
    "depth-1-lip-two-heads": {"depth": 1, "attention_norm": "lip", "heads": 2},
    "depth-1-no-residual": {"depth": 1, "residual": False},
    "deep-lip": {"depth": 6, "attention_norm": "lip"},
    "attention-dropout": {"attn_drop": 0.3, "heads": 2},  # not SNR's default (0), held all the same
}

# The features: dense, or sparse (a tenth of the entries non-zero, as bag-of-words rows with
# the evaluation nodes' erased), which the batched input Linear takes on their entries.
INPUTS = {
    "dense": features,
    "sparse": lambda: features() * (torch.rand(NUM_NODES, IN_FEATS, generator=torch.Generator().manual_seed(2)) < 0.2)
    * (torch.arange(NUM_NODES) % 2 == 0).unsqueeze(1),
}

# Tolerances from an error model (tests/tolerance.py): the batched network sums in other
# orders than the separate ones (the input Linear by `baddbmm`, one GEMM over the S
# seeds' rows or a sum over the non-zero entries, the layers' projections in `lipnorm.kernels.grouped_linear`, the attention
# terms per seed, the output Linear grouped), float32 rounding: either path's x lies
# within k u (|x| + scale) of its exact value, so the two differ by at most
# 2 k u (|x| + scale). k a power of two >= 2x the largest |path - float64| / (u (|x| + scale))
# measured, each float32 path (separate and batched) against the separate network in
# float64 from the same parameters and streams, over every case, input, seed, step and mode
# here (2-core x86-64 VM, torch 2.2.1): logits 7.2 (lip, sparse, evaluation) -> 16;
# gradients (scale: the seed's largest) 15.8 (lip, sparse) -> 32. In float64 the batched
# network against the separate one: logits 5.8, gradients 7.4: the same k at u = 2^-53
# holds.
CONDITION = {"logits": 16, "gradients": 32}


def forward_backward(models, batched, graph, x, step: int, training: bool):
    """Each separate network's logits and gradients (its stream as torch's global one),
    and the batched network's per seed (the same streams as the seeds' generators)."""
    expected_logits, expected_gradients = [], []
    for seed_index, model in enumerate(models):
        model.train(training)
        torch.set_rng_state(stream(seed_index + 10 * step))
        model.zero_grad()
        logits = model(graph, x)
        F.cross_entropy(logits[TRAIN_ROWS], LABELS[TRAIN_ROWS]).backward()
        expected_logits.append(logits.detach())
        expected_gradients.append({name: p.grad.clone() for name, p in model.named_parameters()})
    batched.train(training)
    batched.set_generators([stream(seed_index + 10 * step) for seed_index in range(len(SEEDS))])
    batched.zero_grad()
    logits = batched(graph, x)
    assert logits.shape == (len(SEEDS), NUM_NODES, NUM_CLASSES)
    sum(F.cross_entropy(seed_logits[TRAIN_ROWS], LABELS[TRAIN_ROWS]) for seed_logits in logits).backward()
    return expected_logits, expected_gradients, logits.detach()


def assert_each_seed_separate(models, batched, graph, x, case):
    for step in range(2):
        for training in (True, False):
            expected_logits, expected_gradients, logits = forward_backward(models, batched, graph, x, step, training)
            for seed_index in range(len(SEEDS)):
                assert_within(logits[seed_index], expected_logits[seed_index], CONDITION["logits"],
                              msg=lambda m: f"{case} step {step} training={training} logits: {m}")
                got = batched.seed_gradients(seed_index)
                assert got.keys() == expected_gradients[seed_index].keys()
                scale = max(grad.abs().max().item() for grad in expected_gradients[seed_index].values())
                for name, expected in expected_gradients[seed_index].items():
                    assert_within(got[name], expected, CONDITION["gradients"], scale,
                                  msg=lambda m, name=name: f"{case} step {step} training={training} {name}: {m}")


@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.parametrize("case", CASES)
def test_seed_batched_snr_gives_each_separate_forward_and_gradients(case, inputs):
    models = separate_models(snr_config(**CASES[case]))
    batched = seed_batched(models)
    assert isinstance(batched, SeedBatchedSNR)
    x = INPUTS[inputs]()
    assert (batched._entries(x) is not None) is (inputs == "sparse")  # the path taken
    for seed_index, model in enumerate(models):
        state = batched.seed_state_dict(seed_index)
        assert state.keys() == model.state_dict().keys()
        for name, value in model.state_dict().items():
            assert torch.equal(state[name], value), name
    assert_each_seed_separate(models, batched, small_graph(), x, case)


@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.parametrize("case", CASES)
def test_seed_batched_snr_equals_the_separate_networks_in_float64(case, inputs):
    """Without float32's rounding: the same k at u = 2^-53."""
    models = [model.double() for model in separate_models(snr_config(**CASES[case]))]
    batched = SeedBatchedSNR(models).double()
    assert_each_seed_separate(models, batched, small_graph(), INPUTS[inputs]().double(), case)


def test_per_seed_features_and_an_adam_step():
    """`(S, N, F)` inputs (per-seed missing-features masks): each seed's own; one Adam over
    the batched parameters takes each seed's step."""
    models = separate_models(snr_config(heads=2, attention_norm="lip"))
    batched = SeedBatchedSNR(models)
    graph = small_graph()
    per_seed = torch.stack([features(1), features(2) * (torch.arange(NUM_NODES) % 3 == 0).unsqueeze(1),
                            torch.zeros(NUM_NODES, IN_FEATS)])
    sparse = torch.stack([INPUTS["sparse"](), torch.zeros(NUM_NODES, IN_FEATS), -2 * INPUTS["sparse"]()])
    assert batched._entries(per_seed) is None and batched._entries(sparse) is not None
    for training, per_seed in ((True, per_seed), (False, per_seed), (True, sparse), (False, sparse)):
        batched.train(training)
        batched.set_generators([stream(seed) for seed in range(len(SEEDS))])
        out = batched(graph, per_seed)
        for index, model in enumerate(models):
            torch.set_rng_state(stream(index))
            assert_within(out[index].detach(), model.train(training)(graph, per_seed[index]), CONDITION["logits"])
    optimisers = [torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4) for model in models]
    batched_optimiser = torch.optim.Adam(batched.parameters(), lr=0.01, weight_decay=5e-4)
    for model in models:
        model.zero_grad()
        model.eval()(graph, features()).square().sum().backward()
    batched.zero_grad()
    for index, model in enumerate(models):
        for name, param in model.named_parameters():
            tensor, view = batched.seed_views(index)[name]
            if tensor.grad is None:
                tensor.grad = torch.zeros_like(tensor)
            tensor.grad[view] = param.grad
    for optimiser in (*optimisers, batched_optimiser):
        optimiser.step()
    for index, model in enumerate(models):
        for name, value in model.state_dict().items():
            assert_within(batched.seed_state_dict(index)[name], value, 2)  # Adam's elementwise step


def test_a_seed_with_another_stream_gets_other_masks():
    """The equality above needs each seed's own stream: a shared one gives other numbers."""
    models = separate_models(snr_config())
    batched = SeedBatchedSNR(models).train()
    graph, x = small_graph(), features()
    batched.set_generators([stream(0)] * len(SEEDS))
    shared = batched(graph, x)
    torch.set_rng_state(stream(1))
    assert not torch.allclose(shared[1], models[1].train()(graph, x))


def test_building_leaves_the_global_stream_alone_and_the_layer_outputs_are_the_separate_ones():
    models = separate_models(snr_config(heads=2, depth=2))
    torch.manual_seed(5)
    before = torch.get_rng_state()
    batched = SeedBatchedSNR(models).eval()
    assert torch.equal(torch.get_rng_state(), before)
    graph, x = small_graph(), features()
    outputs = []
    batched(graph, x, layer_outputs=outputs)
    assert len(outputs) == 2
    for seed_index, model in enumerate(models):
        h = F.elu(model.input_fc(x))
        for layer, (rst, attention) in zip(model.layers, outputs):
            own, own_attention = layer(graph, h, get_attention=True)
            heads = slice(2 * seed_index, 2 * seed_index + 2)
            assert_within(rst[:, heads], own, CONDITION["logits"])
            assert_within(attention[:, heads], own_attention, CONDITION["logits"])
            h = h + own.mean(1)
            h = F.elu(h) if layer is model.layers[0] else h


def test_dropedge_masks_give_each_seed_its_subgraphs_numbers():
    """`kept` `(E, S)`: seed s's network sees only its kept edges, as its separate run on
    the graph of those edges does (in evaluation: no dropout to match)."""
    models = separate_models(snr_config(heads=2, attention_norm="lip"))
    batched = SeedBatchedSNR(models).eval()
    graph, x = small_graph(), features()
    kept = torch.rand(graph.num_edges(), len(SEEDS), generator=torch.Generator().manual_seed(1)) < 0.7
    src, dst = graph.edges()
    kept[src == dst] = True
    out = batched(graph, x, kept)
    for index, model in enumerate(models):
        subgraph = graph.edge_subgraph(torch.nonzero(kept[:, index]).squeeze(1), relabel_nodes=False)
        assert_within(out[index], model.eval()(subgraph, x), CONDITION["logits"])


def test_what_is_refused_and_why():
    official = separate_models(snr_config(attention_norm="lip", variant="official", heads=2))
    assert why_not_seed_batched(official[0]) == (
        "LipschitzNorm's official variant takes one norm over all heads, which would mix the seeds"
    )
    with pytest.raises(ValueError, match="cannot batch these seeds: LipschitzNorm's official variant"):
        seed_batched(official)
    plain = separate_models(snr_config())
    assert why_not_seed_batched(plain[0]) is None
    with pytest.raises(ValueError, match=r"cannot batch these seeds: SNRGAT is not the literature GAT \(recipe dgn\)"):
        SeedBatchedGAT(plain)
    torch.manual_seed(0)
    literature = build_model(snr_config(recipe="dgn", residual=False))
    with pytest.raises(ValueError, match=r"cannot batch these seeds: LiteratureGAT is not SNR's GAT \(recipe snr\)"):
        seed_batched([plain[0], literature])
    other = copy.deepcopy(plain[1])
    other.residual = False
    with pytest.raises(ValueError, match="their networks differ"):
        SeedBatchedSNR([plain[0], other])
    with pytest.raises(ValueError, match="needs at least one model"):
        SeedBatchedSNR([])
    with pytest.raises(ValueError, match="got 2 generator states for 3 seeds"):
        SeedBatchedSNR(plain).set_generators([stream(0), stream(1)])
