"""The model-name grammar, in one place: a model name is the composition of the three
orthogonal axes of the experiment,

- `architecture`: the network's layer type (`gat`, `gt`, `gat-classic`, a plugin's);
- `attention_norm`: `none` or `lip` (LipschitzNorm inside the attention layers), for the
  architectures registered with `lip=True`;
- `norm`: the representation normalisation applied after each layer (`none`,
  `pairnorm`, a plugin's), for the architectures registered with `norms=True`;

spelt `<architecture>[-lip][-<norm>]`: `gat-lip-pairnorm` is gat + lip + pairnorm
(`compose_model`), `parse_model` splits one, and `model_parts` replaces some of its
parts (the settings `architecture`, `attention_norm`, `norm` beside `model`). Inside lipnorm a model is carried as
its three parts; the name is the user's spelling (settings, paths, tables), composed
and split here only; `has_model` says whether an architecture has a combination.

`model_names()` is every composition of the registered entries, in the order of rows
and legends; `refresh` recomputes it after a registration (refusing one that would make
a name mean two models) and `forget` after a removal.
"""

from __future__ import annotations

from lipnorm.registry.entries import (
    ARCHITECTURES, ATTENTION_NORMS, NO_NORM, architecture, norm, norm_names, unknown,
)

# Model name -> (architecture, attention_norm, norm) of the current entries, and its
# names as a tuple: the same objects until the registry changes.
_TABLE: dict[str, tuple[str, str, str]] | None = None
_NAMES: tuple[str, ...] = ()


def compose_model(architecture_name: str, attention_norm: str = NO_NORM, norm_name: str = NO_NORM) -> str:
    """`gat` + `lip` + `pairnorm` -> `gat-lip-pairnorm`; ValueError on a combination
    the architecture does not have."""
    entry = architecture(architecture_name)
    if attention_norm not in entry.attention_norms:
        raise ValueError(
            f"architecture {architecture_name!r} has no attention_norm {attention_norm!r}; "
            f"allowed: {', '.join(entry.attention_norms)}"
        )
    norm(norm_name)  # raises on an unknown one
    if norm_name != NO_NORM and not entry.norms:
        raise ValueError(
            f"architecture {architecture_name!r} takes no representation normalisation; got norm {norm_name!r}"
        )
    parts = [architecture_name]
    if attention_norm != NO_NORM:
        parts.append(attention_norm)
    if norm_name != NO_NORM:
        parts.append(norm_name)
    return "-".join(parts)


def parse_model(name: str) -> tuple[str, str, str]:
    """`gat-lip-pairnorm` -> `("gat", "lip", "pairnorm")`; ValueError listing the names."""
    table = _table()
    if name not in table:
        raise unknown("model", name, table)
    return table[name]


def model_parts(
    model: str, architecture: str | None = None, attention_norm: str | None = None, norm_name: str | None = None
) -> tuple[str, str, str]:
    """`model`'s `(architecture, attention_norm, norm)` with each one given instead of
    its part (`gat-lip` with norm `pairnorm`: `("gat", "lip", "pairnorm")`); ValueError
    naming a value the registry does not have, or a combination the architecture does
    not take."""
    given = (architecture, attention_norm, norm_name)
    parts = tuple(part if value is None else value for value, part in zip(given, parse_model(model)))
    compose_model(*parts)  # raises on an unknown part or combination
    return parts


def has_model(architecture_name: str, attention_norm: str, norm_name: str) -> bool:
    """Whether the architecture has this combination (a model name composes it);
    ValueError naming an unknown architecture, attention_norm or norm."""
    architecture(architecture_name)
    norm(norm_name)
    if attention_norm not in ATTENTION_NORMS:
        raise unknown("attention_norm", attention_norm, ATTENTION_NORMS)
    return (architecture_name, attention_norm, norm_name) in _table().values()


def model_names() -> tuple[str, ...]:
    """Every model name the registry composes, in the order of rows and legends (the
    same tuple until the registry changes)."""
    _table()
    return _NAMES


def refresh() -> None:
    """Recompute the model names of the current entries; ValueError (and nothing
    recomputed) when one name would mean two models."""
    forget()
    _table()


def forget() -> None:
    """Drop the model names, recomputed when next asked for (after a removal)."""
    global _TABLE, _NAMES
    _TABLE, _NAMES = None, ()


def _table() -> dict[str, tuple[str, str, str]]:
    """Every model name -> (architecture, attention_norm, norm), in the order of rows
    and legends: per architecture, per normalisation, without then with LipschitzNorm."""
    global _TABLE, _NAMES
    if _TABLE is not None:
        return _TABLE
    table: dict[str, tuple[str, str, str]] = {}
    for entry in ARCHITECTURES.values():
        for norm_name in norm_names() if entry.norms else (NO_NORM,):
            for attention_norm in entry.attention_norms:
                name = compose_model(entry.name, attention_norm, norm_name)
                if name in table:
                    raise ValueError(
                        f"model name {name!r} would mean both {table[name]} and "
                        f"{(entry.name, attention_norm, norm_name)}; choose another name"
                    )
                table[name] = (entry.name, attention_norm, norm_name)
    _TABLE, _NAMES = table, tuple(table)
    return table
