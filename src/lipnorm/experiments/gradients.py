"""gradients: how evenly the attention layers' gradient norms spread over depth."""

from lipnorm.experiments.registry import Output, register_experiment

# Published per run: RUN_KEYS and `grad_ratio` (`lipnorm.results.publish.store_gradient_ratios`).
RATIOS_FILE = "gradient_ratios.csv"

register_experiment(
    "gradients",
    title="gradient norm ratio across layers",
    figures=(
        Output("gradient_heatmaps", "lipnorm.results.figures.training:gradient_heatmaps", ("runs", "gradnorms")),
        Output("gradient_ratio", "lipnorm.results.figures.training:gradient_ratio", ("runs", "gradnorms")),
        Output("training_curves", "lipnorm.results.figures.training:training_curves", ("runs", "epochs")),
    ),
    section="lipnorm.results.sections:gradients_section",
    store="lipnorm.results.publish:store_gradient_ratios",
    stored_files=(RATIOS_FILE,),
    named_in_every_summary=True,
)
