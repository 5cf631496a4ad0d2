"""lipschitz: the empirical Lipschitz constant of one attention layer (`lipnorm probe`), no
training runs: its aggregate is `lipnorm probe`'s table."""

from lipnorm.experiments.registry import Output, register_experiment

PROBE_FILE = "probe.csv"
PROBE_COLUMNS = ("model", "s", "kind", "estimate")

register_experiment(
    "lipschitz",
    title="empirical Lipschitz constant",
    figures=(Output("lipschitz_probe", "lipnorm.results.figures.probe:lipschitz_probe", ("probe",)),),
    section="lipnorm.results.sections:lipschitz_section",
    config={"$ref": "#/$defs/probe_experiment"},
    trains=False,
    aggregate_tables=("probe",),
    store="lipnorm.results.publish:store_probe",
    stored_files=(PROBE_FILE,),
    named_in_every_summary=True,
)
