"""What a training run logs from its model while it trains, through hooks: gradient-group
norms (`GradientNorms`), attention-output norms (`OutputNorms`) and per-layer
representation diagnostics (`LayerStats`)."""

from __future__ import annotations


import dgl
import torch

from lipnorm.train.diagnostics import GraphDiagnostics
from lipnorm.nn.models.numbering import attention_layers, gradient_groups, returns_attention


class GradientNorms:
    """Joint L2 norm of the gradients of each `gradient_groups` group, in one pass."""

    def __init__(self, model: torch.nn.Module):
        groups = gradient_groups(model)
        self.keys = [(layer, kind, group) for layer, kind, group, _ in groups]
        self.params = [param for *_, params in groups for param in params]
        # On the parameters' device, made once: a copy per step would wait for the GPU.
        self.index = torch.tensor(
            [i for i, (*_, params) in enumerate(groups) for _ in params], dtype=torch.long,
            device=self.params[0].device if self.params else None,
        )
        self._subsets: dict[tuple[int, ...], torch.Tensor] = {}

    def __call__(self) -> torch.Tensor:
        """Norms `(len(keys),)` in float64, left on the device (no synchronisation)."""
        return self.of([param.grad for param in self.params])

    def of(self, grads: list[torch.Tensor | None]) -> torch.Tensor:
        """The norms of `grads`, one per parameter of `params` in its order (None: that
        parameter got no gradient); e.g. a seed's slices of seeds trained together."""
        present = tuple(i for i, grad in enumerate(grads) if grad is not None)
        per_param = torch._foreach_norm([grads[i] for i in present])
        # Squares in float64: a float32 square overflows at norms of ~1e19.
        squares = torch.stack(per_param).double().square()
        if len(present) == len(self.params):
            index = self.index
        else:  # some parameters got no gradient: their groups' index, kept per pattern
            if present not in self._subsets:
                self._subsets[present] = self.index[list(present)]
            index = self._subsets[present]
        totals = torch.zeros(len(self.keys), dtype=torch.float64, device=squares.device)
        totals.index_add_(0, index, squares)
        return totals.sqrt()


class OutputNorms:
    """Forward hooks keeping the Frobenius norm of each attention layer's output."""

    def __init__(self, model: torch.nn.Module):
        self.layers = [index for index, _ in attention_layers(model)]
        self.norms: list[torch.Tensor] = []
        self.active = False
        self.handles = [module.register_forward_hook(self._hook) for _, module in attention_layers(model)]

    def _hook(self, module, inputs, output) -> None:
        if self.active:
            tensor = output[0] if isinstance(output, tuple) else output
            self.norms.append(torch.linalg.vector_norm(tensor.detach()))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class LayerStats:
    """Diagnostics of each attention layer's output and attention in a forward pass.

    While `active`, a pre-hook makes every attention layer return its attention too
    (`get_attention=True`) and a forward hook reduces `(output, attention)` to the
    layer's statistics at once (`GraphDiagnostics.layer_stats_tensors`, left on the
    device) and hands the output alone on, so the model computes exactly what it computes
    without them, and an evaluation keeps no layer's output or attention beyond its
    layer: memory O(N H D) rather than O(depth N H D). The layers of an architecture
    registered with `attention=False` (e.g. GCN) are asked for nothing: their statistics
    have no attention entropy.
    """

    def __init__(self, model: torch.nn.Module, graph: dgl.DGLGraph):
        self.diagnostics = GraphDiagnostics(graph)
        self.layers = [index for index, _ in attention_layers(model)]
        # Per layer of the forward: its statistics, metric -> 0-d float64 tensor.
        self.captured: list[dict[str, torch.Tensor]] = []
        self.active = False
        self.handles = []
        self.with_attention = returns_attention(model)
        for _, module in attention_layers(model):
            if self.with_attention:
                self.handles.append(module.register_forward_pre_hook(self._ask_attention, with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._keep, with_kwargs=True))

    def _ask_attention(self, module, args, kwargs):
        if self.active:
            return args, {**kwargs, "get_attention": True}
        return None

    def _keep(self, module, args, kwargs, output):
        if not self.active:
            return None
        if not self.with_attention:
            self.captured.append(self.diagnostics.layer_stats_tensors(output))
            return None
        if not isinstance(output, tuple) or len(output) != 2:
            raise ValueError(
                f"{type(module).__name__} called with get_attention=True returned "
                f"{type(output).__name__}, not (output, attention); register its architecture "
                "with attention=False if its layers have no attention"
            )
        rst, attention = output
        self.captured.append(self.diagnostics.layer_stats_tensors(rst, attention))
        return rst

    def rows(self, epoch: int) -> list[tuple]:
        """`(epoch, layer, metric, value)` rows of the captured forward; clears it."""
        if len(self.captured) != len(self.layers):
            raise RuntimeError(
                f"captured {len(self.captured)} attention layers of {len(self.layers)}: "
                "the forward did not run every attention layer once"
            )
        values = iter(torch.stack([value for stats in self.captured for value in stats.values()]).tolist())
        rows = [(epoch, layer, metric, next(values)) for layer, stats in zip(self.layers, self.captured) for metric in stats]
        self.captured.clear()
        return rows

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()