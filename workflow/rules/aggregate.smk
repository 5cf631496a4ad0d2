"""Per experiment: aggregate the runs (or probe), then write its tables and figures."""


# A grid's run directories do not fit on one command line (a shell command is one
# argument: 128 KiB on Linux; the paper grid's largest experiment has ~86 KB of paths),
# so they reach `lipnorm aggregate` in a file, written here from Python (no shell
# command could carry them either).
rule run_list:
    output:
        run_list=RUN_LIST,
    log:
        f"{RESULTS}/{{experiment}}/logs/run_list.log",
    localrule: True
    params:
        # A params change (another grid) rewrites the list, hence the aggregate.
        run_dirs=run_dirs,
    run:
        write_run_list(output.run_list, params.run_dirs, log[0])


rule aggregate:
    input:
        runs=run_summaries,
        run_list=RUN_LIST,
    output:
        **{
            f"{stem}_{ext}": f"{RESULTS}/{{experiment}}/aggregate/{stem}.{ext}"
            for stem in AGGREGATE_TABLES
            for ext in ("parquet", "csv")
        },
    log:
        f"{RESULTS}/{{experiment}}/logs/aggregate.log",
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.runs_parquet),
        plugins=PLUGIN_ARGS,
    shell:
        "lipnorm aggregate {params.plugins} --out-dir {params.out_dir} --runs-from {input.run_list} > {log} 2>&1"


rule probe:
    output:
        parquet=f"{RESULTS}/lipschitz/aggregate/probe.parquet",
        csv=f"{RESULTS}/lipschitz/aggregate/probe.csv",
    log:
        f"{RESULTS}/lipschitz/logs/probe.log",
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.parquet),
        seed=EXPERIMENTS.get("lipschitz", {}).get("seed", 0),
        scales=",".join(
            grid.format_number(s)
            for s in EXPERIMENTS.get("lipschitz", {}).get("scales", [])
        ),
    shell:
        "lipnorm probe --out-dir {params.out_dir} --seed {params.seed} --scales {params.scales} > {log} 2>&1"


# One rule per experiment: each writes the files its registered entry lists (its tables'
# and figures' stems, lipnorm.experiments), each shown in the report with its caption.
# Tables and figures are cheap: they run beside Snakemake (localrule), not as cluster jobs.
for experiment in EXPERIMENTS:
    entry = experiments.experiment(experiment)
    if entry.tables:

        rule:
            name:
                f"tables_{experiment}"
            input:
                aggregate_files(experiment),
            output:
                [
                    report(
                        path,
                        caption=report_caption(table),
                        category=experiment,
                        labels={"experiment": experiment, "table": table.stem},
                    )
                    for table, path in zip(entry.tables, table_files(experiment))
                ],
            log:
                f"{RESULTS}/{experiment}/logs/tables.log",
            localrule: True
            params:
                experiment=experiment,
                aggregate_dir=lambda wildcards, input: os.path.dirname(input[0]),
                out_dir=lambda wildcards, output: os.path.dirname(output[0]),
                plugins=PLUGIN_ARGS,
            shell:
                "lipnorm tables {params.experiment} {params.plugins} --aggregate-dir {params.aggregate_dir} --out-dir {params.out_dir} > {log} 2>&1"

    if entry.figures:

        rule:
            name:
                f"plots_{experiment}"
            input:
                aggregate_files(experiment),
            output:
                figure_files(experiment, "pdf"),
                [
                    report(
                        path,
                        caption=report_caption(figure),
                        category=experiment,
                        labels={"experiment": experiment, "figure": figure.stem},
                    )
                    for figure, path in zip(
                        entry.figures, figure_files(experiment, "png")
                    )
                ],
            log:
                f"{RESULTS}/{experiment}/logs/plots.log",
            localrule: True
            params:
                experiment=experiment,
                aggregate_dir=lambda wildcards, input: os.path.dirname(input[0]),
                out_dir=lambda wildcards, output: os.path.dirname(output[0]),
                plugins=PLUGIN_ARGS,
            shell:
                "lipnorm plots {params.experiment} {params.plugins} --aggregate-dir {params.aggregate_dir} --out-dir {params.out_dir} > {log} 2>&1"
