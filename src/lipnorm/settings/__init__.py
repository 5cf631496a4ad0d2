"""lipnorm's settings: every default and constant that more than one part of lipnorm
reads, each defined once here and imported where it is used (`constants`).

Imports no torch, no numpy and no other lipnorm module: the CLI's parser, the planner
and the workflow's parsing read these without loading a network (tests/test_settings.py).
"""
