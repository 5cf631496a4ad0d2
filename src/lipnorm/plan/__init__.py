"""The memory and time plan of training runs (`lipnorm plan`, the workflow's resources).

A run's peak memory (MB) and epoch time (s) are predicted by a linear model in its
dataset's sizes and settings (`lipnorm.plan.model`: `RunShape`, the terms,
`Coefficients.estimate`, the calibration file), whose non-negative coefficients are
fitted to runs measured on the machine (`lipnorm.plan.calibration`: `calibrate`,
`fit`); the sizes come from the registry, csbm's parameters or loading a plugin's
dataset (`lipnorm.plan.sizes`); the workflow's training jobs are planned from them,
with their requests and the checkpointing or cluster batches of a job over
`max_mem_mb`, and reported per experiment (`lipnorm.plan.workflow`). Torch-free: the
workflow plans at Snakemake's parse, the CLI at `lipnorm plan`.

    from lipnorm import plan

    coefficients = plan.load_coefficients()
    jobs = plan.plan_workflow(plan.read_config("config/presets/paper.yaml"), coefficients)
"""

from lipnorm.plan.calibration import (
    CALIBRATION,
    CALIBRATION_EPOCHS,
    CALIBRATION_MODEL,
    SHAPE_KEYS,
    calibrate,
    calibration_points,
    fit,
    machine_name,
    measure,
    shape_of,
)
from lipnorm.plan.model import (
    COEFFICIENTS_ENV,
    DEFAULT_COEFFICIENTS,
    FORMAT,
    MEMORY_TERMS,
    PARAMETER_COPIES,
    TIME_TERMS,
    Coefficients,
    Estimate,
    RunShape,
    known_memory_mb,
    load_coefficients,
    memory_terms,
    parameter_count,
    projections_of,
    time_terms,
)
from lipnorm.plan.sizes import csbm_sizes, dataset_sizes
from lipnorm.plan.workflow import (
    MEMORY_MARGIN,
    STARTUP_S,
    TIME_MARGIN,
    Job,
    config_report,
    input_rows,
    plan_job,
    plan_workflow,
    read_config,
)

__all__ = [
    "RunShape",
    "Estimate",
    "Coefficients",
    "load_coefficients",
    "COEFFICIENTS_ENV",
    "DEFAULT_COEFFICIENTS",
    "FORMAT",
    "MEMORY_TERMS",
    "TIME_TERMS",
    "PARAMETER_COPIES",
    "memory_terms",
    "time_terms",
    "known_memory_mb",
    "parameter_count",
    "projections_of",
    "csbm_sizes",
    "dataset_sizes",
    "CALIBRATION",
    "CALIBRATION_EPOCHS",
    "CALIBRATION_MODEL",
    "SHAPE_KEYS",
    "calibration_points",
    "measure",
    "machine_name",
    "shape_of",
    "fit",
    "calibrate",
    "MEMORY_MARGIN",
    "TIME_MARGIN",
    "STARTUP_S",
    "Job",
    "input_rows",
    "plan_job",
    "plan_workflow",
    "read_config",
    "config_report",
]
