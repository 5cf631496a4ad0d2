"""LipschitzNorm for PyG users: drop-in `GATConv` and `TransformerConv`.

Swap one import::

    # from torch_geometric.nn import GATConv, TransformerConv
    from lipnorm.pyg import GATConv, TransformerConv

    conv = GATConv(16, 8, heads=8, norm="lip")  # PyG's arguments, plus norm/alpha/eps

Both classes subclass PyG's own layers (torch_geometric 2.5.3, the pinned version): the
same constructor arguments, parameters (names, shapes, initialisation), forward
signature, return forms and repr (the settings are the attributes ``norm``, ``alpha``,
``eps``). With ``norm=None`` (the default) they *are* PyG's layers: every call goes to
PyG's code (under TorchScript, which cannot call ``super()``, to a copy of PyG 2.5.3's
forward body, op for op). With ``norm="lip"`` the attention scores are
normalised as in Dasoulas, Scaman, Virmaux, "Lipschitz normalization for self-attention
layers with application to graph neural networks" (ICML 2021), per head and per
destination node, before PyG's LeakyReLU (GAT) and `torch_geometric.utils.softmax`:

- `GATConv`: the score :math:`e_{ij} = a_s \\cdot W h_j + a_t \\cdot W h_i` of the edge
  j -> i becomes :math:`\\alpha e_{ij} / (u v_i)` with :math:`u = \\|[a_s; a_t]\\|_2` and
  :math:`v_i = \\sqrt{\\|W h_i\\|^2 + \\max_{k \\in N(i)} \\|W h_k\\|^2}`, so
  :math:`|score| \\le \\alpha` (Cauchy-Schwarz). The same numbers as
  ``lipnorm.nn.GATConv(norm="lip", variant="paper")`` with the same weights.
- `TransformerConv`: the score :math:`q_i \\cdot k_j` (without PyG's
  :math:`1/\\sqrt{D}`) becomes :math:`\\alpha\\, q_i \\cdot k_j / \\max(u v, u w, v w)`
  with :math:`u = \\|q_i\\|`, :math:`v = \\max_{j \\in N(i)} \\|k_j\\|`,
  :math:`w = \\max_{j \\in N(i)} \\|val_j\\|`. The same numbers as
  ``lipnorm.nn.GTConv(norm="lip", variant="paper")``.

The neighbour maxima are `torch_geometric.utils.scatter(..., reduce="max")` over the
in-edges the layer attends over (self-loops included where PyG adds them); the module
imports no DGL: its squared norms, inverse bound and scale are `lipnorm.bound`'s, as
lipnorm's DGL layers' are. Edge features, bipartite inputs, nodes
without in-edges and ``torch.sparse`` adjacencies are handled as PyG handles them (see
each class). docs/pyg.md compares this with the authors' own PyG code.
"""

import math
import typing
import warnings
from typing import Optional, Tuple, Union

try:
    import torch_geometric
    from torch_geometric.nn import GATConv as _PyGGATConv
    from torch_geometric.nn import TransformerConv as _PyGTransformerConv
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError("lipnorm.pyg needs torch_geometric: pip install -c constraints.txt 'lipnorm[pyg]'") from error

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.typing import Adj, NoneType, OptPairTensor, OptTensor, PairTensor, Size, SparseTensor, torch_sparse
from torch_geometric.utils import add_self_loops, is_torch_sparse_tensor, remove_self_loops, scatter, softmax
from torch_geometric.utils.sparse import set_sparse_value

from lipnorm.bound import inverse_sqrt, scaled, squared_norm

if typing.TYPE_CHECKING:
    from typing import overload
else:  # PyG's way: TorchScript compiles `forward` once per overload (return types differ)
    from torch.jit import _overload_method as overload

__all__ = ["GATConv", "TransformerConv", "NORMS", "PYG_VERSION"]

# The PyG version these classes were written and tested against (its forward is mirrored
# by `GATConv.forward` for norm="lip").
PYG_VERSION = "2.5.3"
# Allowed `norm` values: PyG's plain scores, or LipschitzNorm-ed ones.
NORMS = (None, "lip")

if torch_geometric.__version__ != PYG_VERSION:  # pragma: no cover - depends on the install
    warnings.warn(
        f"lipnorm.pyg is tested with torch_geometric {PYG_VERSION}, found {torch_geometric.__version__}; "
        "norm='lip' mirrors that version's GATConv.forward",
        stacklevel=2,
    )


def _check_options(norm, alpha: float, eps: float) -> Optional[str]:
    """The validated `norm` (None or "lip"); ValueError naming a bad value."""
    if norm == "none":  # lipnorm.nn's spelling of None
        norm = None
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; allowed: None, 'lip'")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return norm


def _neighbour_max(values: Tensor, index: Tensor, dim_size: Optional[int]) -> Tensor:
    """Per edge, the max of the non-negative per-edge `values` over the in-edges of its
    destination (`index`): PyG's `scatter(..., reduce="max")`, gathered back."""
    return scatter(values, index, dim=0, dim_size=dim_size, reduce="max").index_select(0, index)


class GATConv(_PyGGATConv):
    r"""PyG's `GATConv` with optional LipschitzNorm on its attention scores.

    With ``norm=None`` this is ``torch_geometric.nn.GATConv`` (2.5.3): every call goes to
    PyG's methods (under TorchScript, to a copy of PyG's forward body, op for op). With
    ``norm="lip"``, for head h and edge j -> i (self-loops included where
    ``add_self_loops`` adds them), the score

    .. math::
        e_{ij} = a_s \cdot \Theta_s x_j + a_t \cdot \Theta_t x_i
                 \;[+\, a_e \cdot \Theta_e e_{ij}]

    becomes :math:`\alpha e_{ij} / (u v_i)` before the LeakyReLU and softmax, with

    .. math::
        u = \|[a_s; a_t; a_e]\|_2, \qquad
        v_i = \sqrt{\|\Theta_t x_i\|^2 + \max_{k \in N(i)}
              (\|\Theta_s x_k\|^2 + \|\Theta_e e_{ik}\|^2)}

    per head, so that :math:`|\alpha e_{ij} / (u v_i)| \le \alpha` (Cauchy-Schwarz on
    :math:`e_{ij} = [a_s; a_t; a_e] \cdot [\Theta_s x_j; \Theta_t x_i; \Theta_e e_{ij}]`).
    Without edge features (no ``edge_dim``, or no ``edge_attr`` given) the edge terms
    are absent and this is the paper's normaliser, the numbers of
    ``lipnorm.nn.GATConv(norm="lip", variant="paper")``. With edge features, the edge
    embedding :math:`\Theta_e e_{ij}` is treated as part of the edge's input, which keeps
    the bound; the self-loops' edge features are PyG's (``fill_value``). When the
    destination features are absent (``x=(x_src, None)``), the score has no
    :math:`a_t` term and neither have :math:`u` and :math:`v_i`.

    Where :math:`u v_i \le` ``eps`` (e.g. all-zero features) the score is 0 (uniform
    attention) instead of 0/0.

    Parameters
    ----------
    in_channels : int or (int, int)
        PyG's: input size, or ``(source, destination)`` sizes (separate ``lin_src`` /
        ``lin_dst``, and a feature pair in ``forward``); -1 for lazy initialisation.
    out_channels, heads : int
        Output size per head, number of heads.
    concat : bool
        Concatenate the heads (else average them), as PyG.
    negative_slope : float
        Slope of the LeakyReLU applied to the (normalised) scores.
    dropout : float
        Dropout on the attention coefficients, as PyG.
    add_self_loops : bool
        Remove and re-add self-loops before attending, as PyG.
    edge_dim : int or None
        Size of the edge features, as PyG (see above for norm="lip").
    fill_value : float, tensor or str
        The self-loops' edge features, as PyG.
    bias : bool
        Learn an additive bias, as PyG.
    norm : None or "lip"
        PyG's scores, or LipschitzNorm-ed ones (``"none"`` is accepted for None).
    alpha : float
        Scale of the normalised scores (finite, >= 0; norm="lip" only): every score lies
        in ``[-alpha, alpha]``.
    eps : float
        Bound ``u v_i`` at or below which the score is 0 (finite, >= 0; norm="lip" only).
    **kwargs
        `torch_geometric.nn.conv.MessagePassing`'s.

    Notes
    -----
    ``forward(x, edge_index, edge_attr=None, size=None, return_attention_weights=None)``
    is PyG's: ``edge_index`` a ``(2, E)`` tensor or a ``torch.sparse`` adjacency
    (``SparseTensor`` too where ``torch_sparse`` is installed), and with
    ``return_attention_weights`` set, also ``(edge_index, attention (E', H))`` (or the
    sparse adjacency holding it), ``edge_index`` being the one attended over (with
    self-loops). The repr is PyG's (``GATConv(8, 32, heads=2)``), whatever `norm`:
    code and tests that read it see PyG's layer; the attributes ``norm``, ``alpha`` and
    ``eps`` tell the settings.
    """

    # PyG's own annotations, as class attributes: PyG's Inspector caches class sources
    # by class name, so for a subclass of the same name it never reads the parent's
    # `# propagate_type:` comments.
    propagate_type = {"x": OptPairTensor, "alpha": Tensor}
    edge_updater_type = {"alpha": OptPairTensor, "edge_attr": OptTensor}
    # For TorchScript: the attribute `normalized_scores` fills.
    _scores: Optional[Tensor]

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = "mean",
        bias: bool = True,
        *,
        norm: Optional[str] = None,
        alpha: float = 1.0,
        eps: float = 1e-12,
        **kwargs,
    ):
        norm = _check_options(norm, alpha, eps)
        super().__init__(
            in_channels, out_channels, heads=heads, concat=concat, negative_slope=negative_slope, dropout=dropout,
            add_self_loops=add_self_loops, edge_dim=edge_dim, fill_value=fill_value, bias=bias, **kwargs,
        )
        self.norm = norm
        self.alpha = float(alpha)
        self.eps = float(eps)
        # `normalized_scores`: route norm=None through `edge_update`'s own branch too and
        # keep the pre-LeakyReLU scores.
        self._capture = False
        self._scores: Optional[Tensor] = None

    @overload
    def forward(
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: NoneType = None,
    ) -> Tensor:
        pass

    @overload
    def forward(  # noqa: F811
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Tensor,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: bool = None,
    ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        pass

    @overload
    def forward(  # noqa: F811
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: SparseTensor,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: bool = None,
    ) -> Tuple[Tensor, SparseTensor]:
        pass

    def forward(  # noqa: F811
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: Optional[bool] = None,
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]], Tuple[Tensor, SparseTensor]]:
        """PyG's ``GATConv.forward``; see the class docstring and PyG's documentation.

        With norm=None (in eager mode) this is PyG's method itself. Otherwise it is
        PyG 2.5.3's body step for step, except that each node's attention term travels
        with its projection's squared norm, ``(N, H, 2)``, to `edge_update` (through
        PyG's own `edge_updater` and its signature).
        """
        if not torch.jit.is_scripting():
            if self.norm is None and not self._capture:
                return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        H, C = self.heads, self.out_channels
        shared = False  # one projection for sources and destinations
        if isinstance(x, Tensor):
            assert x.dim() == 2, "Static graphs not supported in 'GATConv'"
            if self.lin is not None:
                x_src = x_dst = self.lin(x).view(-1, H, C)
                shared = True
            else:
                assert self.lin_src is not None and self.lin_dst is not None
                x_src = self.lin_src(x).view(-1, H, C)
                x_dst = self.lin_dst(x).view(-1, H, C)
        else:
            x_src, x_dst = x
            assert x_src.dim() == 2, "Static graphs not supported in 'GATConv'"
            if self.lin is not None:
                x_src = self.lin(x_src).view(-1, H, C)
                if x_dst is not None:
                    x_dst = self.lin(x_dst).view(-1, H, C)
            else:
                assert self.lin_src is not None and self.lin_dst is not None
                x_src = self.lin_src(x_src).view(-1, H, C)
                if x_dst is not None:
                    x_dst = self.lin_dst(x_dst).view(-1, H, C)
        x = (x_src, x_dst)

        # (attention term, squared norm) per node and head, (N, H, 2).
        src_squared = squared_norm(x_src)
        alpha_src = torch.stack([(x_src * self.att_src).sum(dim=-1), src_squared], dim=-1)
        alpha_dst: Optional[Tensor] = None
        if x_dst is not None:
            dst_squared = src_squared if shared else squared_norm(x_dst)
            alpha_dst = torch.stack([(x_dst * self.att_dst).sum(dim=-1), dst_squared], dim=-1)
        alpha = (alpha_src, alpha_dst)

        if self.add_self_loops:
            if isinstance(edge_index, Tensor):
                num_nodes = x_src.size(0)
                if x_dst is not None:
                    num_nodes = min(num_nodes, x_dst.size(0))
                num_nodes = min(size) if size is not None else num_nodes
                edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
                edge_index, edge_attr = add_self_loops(
                    edge_index, edge_attr, fill_value=self.fill_value, num_nodes=num_nodes
                )
            elif isinstance(edge_index, SparseTensor):
                if self.edge_dim is None:
                    edge_index = torch_sparse.set_diag(edge_index)
                else:
                    raise NotImplementedError(
                        "The usage of 'edge_attr' and 'add_self_loops' "
                        "simultaneously is currently not yet supported for "
                        "'edge_index' in a 'SparseTensor' form"
                    )

        alpha = self.edge_updater(edge_index, alpha=alpha, edge_attr=edge_attr, size=size)
        out = self.propagate(edge_index, x=x, alpha=alpha, size=size)

        if self.concat:
            out = out.view(-1, self.heads * self.out_channels)
        else:
            out = out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias

        if isinstance(return_attention_weights, bool):
            if isinstance(edge_index, Tensor):
                if is_torch_sparse_tensor(edge_index):
                    adj = set_sparse_value(edge_index, alpha)
                    return out, (adj, alpha)
                else:
                    return out, (edge_index, alpha)
            elif isinstance(edge_index, SparseTensor):
                return out, edge_index.set_value(alpha, layout="coo")
        else:
            return out

    def edge_update(
        self,
        alpha_j: Tensor,
        alpha_i: Optional[Tensor],
        edge_attr: Optional[Tensor],
        index: Tensor,
        ptr: Optional[Tensor],
        dim_size: Optional[int],
    ) -> Tensor:
        """PyG's for norm=None; for norm="lip", the normalised scores' attention.

        `alpha_j`, `alpha_i`: ``(E, H, 2)``, the attention term and the squared norm of
        the source's / destination's projection (`forward`'s packing).
        """
        if not torch.jit.is_scripting():
            if self.norm is None and not self._capture:
                return super().edge_update(alpha_j, alpha_i, edge_attr, index, ptr, dim_size)
        score, src_squared = alpha_j.select(-1, 0), alpha_j.select(-1, 1)
        attn_squared = squared_norm(self.att_src)  # (1, H)
        dst_squared: Optional[Tensor] = None
        if alpha_i is not None:
            score = score + alpha_i.select(-1, 0)
            dst_squared = alpha_i.select(-1, 1)
            attn_squared = attn_squared + squared_norm(self.att_dst)
        if index.numel() == 0:
            if self._capture:
                self._scores = score
            return score
        if edge_attr is not None and self.lin_edge is not None:
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)
            edge_attr = self.lin_edge(edge_attr)
            edge_attr = edge_attr.view(-1, self.heads, self.out_channels)
            score = score + (edge_attr * self.att_edge).sum(dim=-1)
            src_squared = src_squared + squared_norm(edge_attr)
            attn_squared = attn_squared + squared_norm(self.att_edge)
        if self.norm is not None:
            # v_i^2 per edge (i its destination): ||x_i||^2 + max over i's in-edges.
            v_squared = _neighbour_max(src_squared, index, dim_size)
            if dst_squared is not None:
                v_squared = dst_squared + v_squared
            score = scaled(score * inverse_sqrt(attn_squared * v_squared, self.eps), self.alpha)
        if self._capture:
            self._scores = score

        score = F.leaky_relu(score, self.negative_slope)
        score = softmax(score, index, ptr, dim_size)
        score = F.dropout(score, p=self.dropout, training=self.training)
        return score

    def normalized_scores(self, x, edge_index, edge_attr: Optional[Tensor] = None, size=None) -> Tensor:
        """The scores fed to the LeakyReLU, ``(E', H)``, on the edges attended over
        (``forward``'s returned ``edge_index``): PyG's raw scores for norm=None, the
        normalised ones (in ``[-alpha, alpha]``) for norm="lip". Runs a forward in
        evaluation mode; arguments as ``forward``'s.
        """
        training = self.training
        self.eval()
        self._capture = True
        try:
            self.forward(x, edge_index, edge_attr, size)
            return self._scores
        finally:
            self._capture, self._scores = False, None
            self.train(training)



class TransformerConv(_PyGTransformerConv):
    r"""PyG's `TransformerConv` with optional LipschitzNorm on its attention scores.

    With ``norm=None`` this is ``torch_geometric.nn.TransformerConv`` (2.5.3): every
    call goes to PyG's methods (under TorchScript, to a copy of PyG's forward and
    message bodies, op for op). With ``norm="lip"``, for head h and edge j -> i, PyG's score
    :math:`q_i \cdot k_j / \sqrt{D}` is replaced by

    .. math::
        \alpha\, \frac{q_i \cdot k_j}{\max(u v, u w, v w)}, \quad
        u = \|q_i\|, \; v = \max_{k \in N(i)} \|k_k\|, \; w = \max_{k \in N(i)} \|val_k\|

    per head, which lies in ``[-alpha, alpha]``; the numbers of
    ``lipnorm.nn.GTConv(norm="lip", variant="paper")`` with the same weights (no
    :math:`1/\sqrt{D}`: the normaliser makes it redundant). With ``edge_dim``, PyG adds
    the edge embedding :math:`\Theta_e e_{ij}` to the key and to the value of the edge;
    :math:`v` and :math:`w` are then the maxima of those per-edge keys and values, which
    keeps the bound. A bound at or below ``eps`` (all-zero queries, keys or values) gives
    the score 0 instead of 0/0. Softmax, attention dropout, ``root_weight``, ``beta`` and
    ``concat`` are PyG's.

    Parameters
    ----------
    in_channels : int or (int, int)
        PyG's: input size, or ``(source, destination)`` sizes (keys and values from the
        sources, queries and the root term from the destinations).
    out_channels, heads : int
        Output size per head, number of heads.
    concat : bool
        Concatenate the heads (else average them), as PyG.
    beta : bool
        PyG's gated root term.
    dropout : float
        Dropout on the attention coefficients, as PyG.
    edge_dim : int or None
        Size of the edge features, as PyG (see above for norm="lip").
    bias : bool
        Bias of the root term ``lin_skip``, as PyG.
    root_weight : bool
        Add the root term ``lin_skip(x_dst)``, as PyG.
    norm : None or "lip"
        PyG's scores, or LipschitzNorm-ed ones (``"none"`` is accepted for None).
    alpha : float
        Scale of the normalised scores (finite, >= 0; norm="lip" only).
    eps : float
        Bound at or below which the score is 0 (finite, >= 0; norm="lip" only). The
        default 0 maps only 0/0 to 0, as ``lipnorm.nn.GTConv`` does.
    **kwargs
        `torch_geometric.nn.conv.MessagePassing`'s.

    Notes
    -----
    ``forward(x, edge_index, edge_attr=None, return_attention_weights=None)`` is PyG's
    (the layer adds no self-loops; nodes without in-edges get the root term alone). The
    repr is PyG's, whatever `norm` (see `GATConv`).
    """

    # PyG's own annotation, as a class attribute (see `GATConv.propagate_type`).
    propagate_type = {"query": Tensor, "key": Tensor, "value": Tensor, "edge_attr": OptTensor}
    # For TorchScript: PyG's attention of the last forward, and `normalized_scores`'.
    _alpha: OptTensor
    _scores: Optional[Tensor]

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        beta: bool = False,
        dropout: float = 0.0,
        edge_dim: Optional[int] = None,
        bias: bool = True,
        root_weight: bool = True,
        *,
        norm: Optional[str] = None,
        alpha: float = 1.0,
        eps: float = 0.0,
        **kwargs,
    ):
        norm = _check_options(norm, alpha, eps)
        super().__init__(
            in_channels, out_channels, heads=heads, concat=concat, beta=beta, dropout=dropout, edge_dim=edge_dim,
            bias=bias, root_weight=root_weight, **kwargs,
        )
        self.norm = norm
        self.alpha = float(alpha)
        self.eps = float(eps)
        # `normalized_scores`: route norm=None through `message`'s own branch too and
        # keep the pre-softmax scores.
        self._capture = False
        self._scores: Optional[Tensor] = None

    @overload
    def forward(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        return_attention_weights: NoneType = None,
    ) -> Tensor:
        pass

    @overload
    def forward(  # noqa: F811
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Tensor,
        edge_attr: OptTensor = None,
        return_attention_weights: bool = None,
    ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        pass

    @overload
    def forward(  # noqa: F811
        self,
        x: Union[Tensor, PairTensor],
        edge_index: SparseTensor,
        edge_attr: OptTensor = None,
        return_attention_weights: bool = None,
    ) -> Tuple[Tensor, SparseTensor]:
        pass

    def forward(  # noqa: F811
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        return_attention_weights: Optional[bool] = None,
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]], Tuple[Tensor, SparseTensor]]:
        """PyG's ``TransformerConv.forward`` (in eager mode, PyG's method itself; under
        TorchScript, PyG 2.5.3's body, which TorchScript cannot reach through ``super()``)."""
        if not torch.jit.is_scripting():
            return super().forward(x, edge_index, edge_attr, return_attention_weights)
        H, C = self.heads, self.out_channels
        if isinstance(x, Tensor):
            x = (x, x)
        query = self.lin_query(x[1]).view(-1, H, C)
        key = self.lin_key(x[0]).view(-1, H, C)
        value = self.lin_value(x[0]).view(-1, H, C)
        out = self.propagate(edge_index, query=query, key=key, value=value, edge_attr=edge_attr)
        alpha = self._alpha
        self._alpha = None
        if self.concat:
            out = out.view(-1, self.heads * self.out_channels)
        else:
            out = out.mean(dim=1)
        if self.root_weight:
            x_r = self.lin_skip(x[1])
            if self.lin_beta is not None:
                beta = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1))
                beta = beta.sigmoid()
                out = beta * x_r + (1 - beta) * out
            else:
                out = out + x_r
        if isinstance(return_attention_weights, bool):
            assert alpha is not None
            if isinstance(edge_index, Tensor):
                return out, (edge_index, alpha)
            elif isinstance(edge_index, SparseTensor):
                return out, edge_index.set_value(alpha, layout="coo")
        else:
            return out

    def message(
        self,
        query_i: Tensor,
        key_j: Tensor,
        value_j: Tensor,
        edge_attr: Optional[Tensor],
        index: Tensor,
        ptr: Optional[Tensor],
        size_i: Optional[int],
    ) -> Tensor:
        """PyG's for norm=None; for norm="lip", the same with the normalised scores."""
        if not torch.jit.is_scripting():
            if self.norm is None and not self._capture:
                return super().message(query_i, key_j, value_j, edge_attr, index, ptr, size_i)
        if self.lin_edge is not None:
            assert edge_attr is not None
            edge_attr = self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)
            key_j = key_j + edge_attr
        value = value_j
        if edge_attr is not None:
            value = value + edge_attr

        dot = (query_i * key_j).sum(dim=-1)  # (E, H), without PyG's 1 / sqrt(D)
        if self.norm is None:  # only for `normalized_scores`: PyG's formula
            alpha = dot / math.sqrt(self.out_channels)
        else:
            alpha = self._normalised(dot, query_i, key_j, value, index, size_i)
        if self._capture:
            self._scores = alpha

        alpha = softmax(alpha, index, ptr, size_i)
        self._alpha = alpha
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        return value * alpha.view(-1, self.heads, 1)

    def _normalised(
        self, dot: Tensor, query_i: Tensor, key_j: Tensor, value: Tensor, index: Tensor, size_i: Optional[int]
    ) -> Tensor:
        """LipschitzNorm of the raw dot products ``(E, H)``."""
        query_squared = squared_norm(query_i)
        # max_j ||k_j||^2 and max_j ||val_j||^2 over the destination's in-edges, one reduce.
        maxima = _neighbour_max(torch.stack([squared_norm(key_j), squared_norm(value)], dim=-1), index, size_i)
        key_max, value_max = maxima.select(-1, 0), maxima.select(-1, 1)
        bound_squared = torch.maximum(
            torch.maximum(query_squared * key_max, query_squared * value_max), key_max * value_max
        )
        return scaled(dot * inverse_sqrt(bound_squared, self.eps), self.alpha)

    def normalized_scores(self, x, edge_index, edge_attr: Optional[Tensor] = None) -> Tensor:
        """The scores fed to the softmax, ``(E, H)`` in edge order: PyG's
        ``q_i . k_j / sqrt(D)`` for norm=None, the normalised ones (in
        ``[-alpha, alpha]``) for norm="lip". Runs a forward in evaluation mode;
        arguments as ``forward``'s."""
        training = self.training
        self.eval()
        self._capture = True
        try:
            self.forward(x, edge_index, edge_attr)
            return self._scores
        finally:
            self._capture, self._scores = False, None
            self.train(training)

