"""lipnorm's settings, each with one owner: the constants and defaults several parts of
lipnorm read (`constants`), csbm's parameters (`csbm`), the training recipes' defaults
(`recipes`), a model's settings (`model_config.ModelConfig`) and a run's
(`train_config.TrainConfig`, `load_config`), with their checks.

Imports no torch and no numpy, and of lipnorm only the registry: the CLI's parser, the
planner and the workflow's parsing read these, and `lipnorm train` checks a run's
settings, without loading a network (tests/settings/test_settings.py).
"""
