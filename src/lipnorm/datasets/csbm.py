"""`csbm`: a contextual stochastic block model graph, generated from its parameters
(`lipnorm.data.csbm`; `load_dataset(csbm=...)`, `--csbm`). No raw files; its sizes
follow from its parameters (`lipnorm.plan.sizes.csbm_sizes`)."""

from __future__ import annotations

from lipnorm.registry.register import register_dataset


def read(csbm=None):
    """The csbm graph of `csbm` (a `CSBMParams`, a dict or a `key=value,...` spec; None:
    the defaults)."""
    from lipnorm.data.csbm import csbm_params, generate_csbm

    return generate_csbm(csbm_params(csbm))


register_dataset("csbm", label="CSBM", colour="#949494", read=read, options=("csbm",))
