"""Seeds trained together (`lipnorm.nn.models.seed_batch.SeedBatchedGAT`): S literature GATs of one
configuration as one network give each seed's separate forward, loss gradient and Adam
step, with each seed's dropout drawn from its own stream as a separate run draws it."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.seed_batch import SeedBatchedGAT, why_not_seed_batched, seed_dropout
from lipnorm.settings.model_config import ModelConfig
from tests.nn.test_models import IN_FEATS, NUM_CLASSES, NUM_NODES, features, small_graph
from tests.tolerance import assert_within

SEEDS = (0, 1, 2)
LABELS = torch.arange(NUM_NODES) % NUM_CLASSES
TRAIN_ROWS = torch.arange(0, NUM_NODES, 2)


def dgn_config(**settings) -> ModelConfig:
    settings = {
        "model": "gat", "depth": 4, "heads": 1, "hidden": 16, "feat_drop": 0.6, "attn_drop": 0.6,
        "batchnorm_momentum": 0.3, "recipe": "dgn", **settings,
    }
    return ModelConfig(in_feats=IN_FEATS, num_classes=NUM_CLASSES, **settings)


def separate_models(cfg: ModelConfig) -> list[torch.nn.Module]:
    models = []
    for seed in SEEDS:
        torch.manual_seed(seed)
        models.append(build_model(cfg))
    return models


def stream(seed: int) -> torch.Tensor:
    """The state of torch's global generator a separate run of `seed` trains from (here:
    seeded anew, as a test's stand-in for the state after its model was built)."""
    return torch.Generator().manual_seed(100 + seed).get_state()


CASES = {
    "plain": {},
    "lip": {"attention_norm": "lip"},
    "batchnorm": {"norm": "batchnorm"},
    "lip-pairnorm": {"attention_norm": "lip", "norm": "pairnorm"},
    "dgn": {"norm": "dgn", "dgn_skip_weight": 0.5},
    "residual": {"residual": True, "norm": "batchnorm"},
    "initial-residual": {"initial_residual": 0.2, "attention_norm": "lip"},
    "two-heads": {"heads": 2, "hidden": 3, "norm": "pairnorm"},
    "depth-1": {"depth": 1},
    "no-output-relu": {"output_relu": False, "norm": "batchnorm"},  # DeCorr's GAT
}
# The first layer's input: dense, with most rows erased (missing features), or all zero.
INPUTS = {"dense": lambda: features(), "erased-rows": lambda: features() * (torch.arange(NUM_NODES) % 4 == 0).unsqueeze(1),
          "all-zero": lambda: torch.zeros(NUM_NODES, IN_FEATS)}


# Tolerances from an error model. The batched network sums in other orders than the
# separate ones (the seeds' projections in `lipnorm.kernels.grouped_linear` where theirs are
# MKL's, attention per seed, BatchNorm over S * W columns): float32 rounding. Either path's
# number x lies within k u (|x| + scale) of its exact value, u the unit roundoff of the
# dtype (2^-24, 2^-53), k the condition of the quantity on these inputs (how much the
# network magnifies unit roundings: a property of the numbers, not of the CPU), scale the
# tensor's largest |x| (for gradients the seed's largest gradient: attn_r's are zero but
# for rounding where the LeakyReLU is linear over a node's in-edges, the softmax cancelling
# them). So the two differ by at most 2 k u (|x| + scale): rtol = 2 k u, atol = rtol * scale.
# Each k is a power of two >= 2x the largest |path - float64| / (u (|x| + scale)) measured,
# each float32 path (separate and batched) against the same network in float64 from the
# same parameters and dropout streams, over every case, seed and step of the test under 6
# summation orders of torch and MKL (ATEN_CPU_CAPABILITY default, AVX2, AVX-512; MKL_CBWR
# COMPATIBLE, AVX2; 1 and 2 threads).
# Measured: logits 20 (plain; eval 5.5), gradients 33 (batchnorm), BatchNorm's running
# statistics 9.2 (residual); "dgn" (BatchNorm over near-constant group columns, skip weight
# 0.5, magnifies the rest): logits 52 (eval 19), gradients 270, running statistics 93.
CONDITION = {"logits": 64, "gradients": 128, "running": 32}
DGN_CONDITION = {"logits": 128, "gradients": 1024, "running": 256}


@pytest.mark.parametrize(
    "case, inputs", [(case, "dense") for case in CASES] + [("lip-pairnorm", "erased-rows"), ("dgn", "all-zero")]
)
def test_seed_batch_give_each_separate_forward_gradient_and_adam_step(case, inputs):
    condition = DGN_CONDITION if case == "dgn" else CONDITION
    cfg = dgn_config(**CASES[case])
    models = separate_models(cfg)
    batched = SeedBatchedGAT(models)
    graph, x = small_graph(), INPUTS[inputs]()
    for seed_index, model in enumerate(models):
        assert batched.seed_state_dict(seed_index).keys() == model.state_dict().keys()
        for name, value in model.state_dict().items():
            assert torch.equal(batched.seed_state_dict(seed_index)[name], value), name
    optimisers = [torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4) for model in models]
    batched_optimiser = torch.optim.Adam(batched.parameters(), lr=0.01, weight_decay=5e-4)
    for step in range(3):
        # Separate runs: each from its stream, as torch's global generator.
        outputs, gradients = [], []
        for seed_index, model in enumerate(models):
            model.train()
            torch.set_rng_state(stream(seed_index + 10 * step))
            logits = model(graph, x)
            model.zero_grad()
            F.cross_entropy(logits[TRAIN_ROWS], LABELS[TRAIN_ROWS]).backward()
            outputs.append(logits.detach())
            gradients.append({name: p.grad.clone() for name, p in model.named_parameters()})
        batched.train()
        batched.set_generators([stream(seed_index + 10 * step) for seed_index in range(len(SEEDS))])
        logits = batched(graph, x)
        assert logits.shape == (len(SEEDS), NUM_NODES, NUM_CLASSES)
        batched.zero_grad()
        sum(F.cross_entropy(seed_logits[TRAIN_ROWS], LABELS[TRAIN_ROWS]) for seed_logits in logits).backward()
        for seed_index in range(len(SEEDS)):
            assert_within(logits[seed_index].detach(), outputs[seed_index], condition["logits"])
            batched_gradients = batched.seed_gradients(seed_index)
            assert batched_gradients.keys() == gradients[seed_index].keys()
            scale = max(grad.abs().max().item() for grad in gradients[seed_index].values())
            for name, expected in gradients[seed_index].items():
                assert_within(batched_gradients[name], expected, condition["gradients"], scale,
                              msg=lambda m, name=name: f"{case} step {step} {name}: {m}")
        # One Adam over the batched parameters takes each seed's step: given each seed's
        # own gradients (the separate runs'), the parameters agree to the last bit here.
        for seed_index in range(len(SEEDS)):
            for name, (tensor, index) in batched.seed_views(seed_index).items():
                if name in gradients[seed_index]:
                    tensor.grad[index] = gradients[seed_index][name]
        for optimiser in (*optimisers, batched_optimiser):
            optimiser.step()
        for seed_index, model in enumerate(models):
            state = batched.seed_state_dict(seed_index)
            parameters = dict(model.named_parameters())
            for name, value in model.state_dict().items():
                if name in parameters:
                    # Adam's elementwise step (measured: equal bits) on other CPUs at most
                    # a rounding or two apart (a fused multiply-add in a vector body
                    # against a scalar tail): k = 2.
                    assert_within(state[name], value, 2)
                elif value.is_floating_point():
                    # BatchNorm's running statistics come from the forwards
                    assert_within(state[name], value, condition["running"])
                else:
                    assert torch.equal(state[name], value), name
    batched.eval()
    evaluated = batched(graph, x)
    for seed_index, model in enumerate(models):
        assert_within(evaluated[seed_index], model.eval()(graph, x), condition["logits"])


@pytest.mark.parametrize("case", CASES)
def test_seed_batch_equal_the_separate_networks_in_float64(case):
    """Without float32's rounding, what the tolerances above allow for is gone: in float64
    each seed's logits and gradients equal its separate network's to their rounding, the
    same k at u = 2^-53 (measured: logits 12, gradients 80 ("dgn"; 19 the others))."""
    models = [model.double() for model in separate_models(dgn_config(**CASES[case]))]
    batched = SeedBatchedGAT(models).double()
    graph, x = small_graph(), INPUTS["dense"]().double()
    for step in range(2):
        expected_logits, expected_gradients = [], []
        for seed_index, model in enumerate(models):
            model.train()
            torch.set_rng_state(stream(seed_index + 10 * step))
            model.zero_grad()
            logits = model(graph, x)
            F.cross_entropy(logits[TRAIN_ROWS], LABELS[TRAIN_ROWS]).backward()
            expected_logits.append(logits.detach())
            expected_gradients.append({name: p.grad.clone() for name, p in model.named_parameters()})
        batched.train()
        batched.set_generators([stream(seed_index + 10 * step) for seed_index in range(len(SEEDS))])
        batched.zero_grad()
        logits = batched(graph, x)
        sum(F.cross_entropy(seed_logits[TRAIN_ROWS], LABELS[TRAIN_ROWS]) for seed_logits in logits).backward()
        condition = DGN_CONDITION if case == "dgn" else CONDITION
        for seed_index in range(len(SEEDS)):
            assert_within(logits[seed_index].detach(), expected_logits[seed_index], condition["logits"])
            scale = max(grad.abs().max().item() for grad in expected_gradients[seed_index].values())
            for name, grad in batched.seed_gradients(seed_index).items():
                assert_within(grad, expected_gradients[seed_index][name], condition["gradients"], scale)


def test_a_seed_with_another_stream_gets_other_masks():
    """The equality above needs each seed's own stream: a shared one gives other numbers."""
    models = separate_models(dgn_config())
    batched = SeedBatchedGAT(models).train()
    graph, x = small_graph(), features()
    batched.set_generators([stream(0)] * len(SEEDS))
    shared = batched(graph, x)
    torch.set_rng_state(stream(1))
    assert not torch.allclose(shared[1], models[1].train()(graph, x))


def test_seed_dropout_draws_each_slice_as_f_dropout_draws_a_whole_tensor():
    x = torch.randn(3, 5, 4)
    generators = [torch.Generator().manual_seed(seed) for seed in (7, 8, 9)]
    out = seed_dropout(x.transpose(0, 1), 0.4, generators, dim=1)  # a non-contiguous view
    for index, seed in enumerate((7, 8, 9)):
        torch.manual_seed(seed)
        torch.testing.assert_close(out[:, index], F.dropout(x[index].contiguous(), 0.4), rtol=0, atol=0)
    assert seed_dropout(x, 0.0, generators, dim=0) is x


def test_building_the_batched_network_leaves_the_global_stream_alone():
    models = separate_models(dgn_config(norm="dgn"))
    torch.manual_seed(5)
    before = torch.get_rng_state()
    SeedBatchedGAT(models)
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize(
    "cfg, message",
    [
        (dgn_config(recipe="lipnorm", heads=2, hidden=3), "DeepGAT is not the literature GAT \\(recipe dgn\\)"),
        (dgn_config(norm="pairnorm", model="gat"), None),
    ],
)
def test_why_not_seed_batched_says_why(cfg, message):
    torch.manual_seed(0)
    model = build_model(cfg)
    if message is None:
        assert why_not_seed_batched(model) is None
        model.pairnorms[0].mode = "PN-SI"
        message = "PairNorm mode 'PN-SI' \\(per_graph=False\\) has no seed-batched form; PN has"
    assert why_not_seed_batched(model) is not None
    with pytest.raises(ValueError, match=f"cannot batch these seeds: {message}"):
        SeedBatchedGAT([model])


def test_seeds_of_two_configurations_are_refused():
    torch.manual_seed(0)
    models = [build_model(dgn_config(depth=3)), build_model(dataclasses.replace(dgn_config(depth=3), hidden=8))]
    with pytest.raises(ValueError, match="their networks differ in shape"):
        SeedBatchedGAT(models)
    with pytest.raises(ValueError, match="got 2 generator states for 1 seeds"):
        SeedBatchedGAT(models[:1]).set_generators([stream(0), stream(1)])
    with pytest.raises(ValueError, match="needs at least one model"):
        SeedBatchedGAT([])


def test_per_seed_features_are_taken_as_the_shared_ones():
    """`(S, N, F)`: each seed its own features (a seeded missing-features mask); the same
    features given per seed give the shared result; a wrong S is refused."""
    models = separate_models(dgn_config(norm="batchnorm"))
    batched = SeedBatchedGAT(models).eval()
    graph, x = small_graph(), INPUTS["erased-rows"]()
    per_seed = torch.stack([x, features(), torch.zeros_like(x)])
    out = batched(graph, per_seed)
    for index, seed_features in enumerate(per_seed):
        # k measured (as above): 8.0 -> 32
        assert_within(out[index], models[index].eval()(graph, seed_features), 32)
    torch.testing.assert_close(batched(graph, x.expand(3, -1, -1)), batched(graph, x))
    with pytest.raises(ValueError, match=r"feat has shape \(2, 12, 7\); expected \(N, F\) or \(S, N, F\) with S = 3"):
        batched(graph, per_seed[:2])


@pytest.mark.parametrize("dropedge", [False, True], ids=["all-edges", "dropedge"])
@pytest.mark.parametrize("case", ["plain", "lip", "two-heads"])
def test_seed_batch_by_dgls_calls_equal_the_kernels(case, dropedge):
    """Where the kernel cannot be built the seed-batched layers take DGL's calls, with the
    same dropout masks (per seed, over its kept edges): the same logits and gradients."""
    graph, x = small_graph(), features()
    kept = None
    if dropedge:
        kept = torch.rand(graph.num_edges(), len(SEEDS), generator=torch.Generator().manual_seed(1)) < 0.7
        src, dst = graph.edges()
        kept[src == dst] = True
    results = []
    for fused in (True, False):
        batched = SeedBatchedGAT(separate_models(dgn_config(**CASES[case])))
        for layer in batched.layers:
            layer.fused = fused
        batched.train()
        batched.set_generators([stream(seed) for seed in range(len(SEEDS))])
        logits = batched(graph, x, kept)
        logits.pow(2).sum().backward()
        results.append((logits.detach(), [p.grad for p in batched.parameters() if p.grad is not None]))
    (fast, fast_grads), (plain, plain_grads) = results
    # k measured (each path in float32 against DGL's in float64): logits 3.2 -> 8,
    # gradients (of the largest gradient, as above) 4.9 -> 16.
    assert_within(fast, plain, 8)
    assert len(fast_grads) == len(plain_grads) > 0
    scale = max(grad.abs().max().item() for grad in plain_grads)
    for got, expected in zip(fast_grads, plain_grads):
        assert_within(got, expected, 16, scale)
