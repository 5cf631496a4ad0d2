"""Representation normalisations applied after a layer, one a file: `pairnorm` (PairNorm),
`batchnorm` (BatchNorm), `dgn` (DiffGroupNorm). Users import PairNorm from `lipnorm.nn`."""
