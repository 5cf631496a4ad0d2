"""lipnorm: LipschitzNorm experiments, from datasets to tables, figures and report.

Run with a profile (`snakemake --profile profiles/default`); pick a preset with
`--configfile config/presets/{smoke,paper}.yaml`. See workflow/rules/*.smk.
"""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


# common.smk validates the config (workflow/schemas/config.schema.yaml) first.
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/bench.smk"


rule all:
    default_target: True
    input:
        final_targets(),
