"""Deprecated: renamed `lipnorm.yaml_numbers` (YAML 1.2 numbers in configs).

Importing this module warns (`DeprecationWarning`) and gives `lipnorm.yaml_numbers`'s names.
"""

import warnings

from lipnorm import yaml_numbers as _renamed
from lipnorm.yaml_numbers import *  # noqa: F401,F403

warnings.warn("lipnorm.numbers is deprecated: import lipnorm.yaml_numbers instead", DeprecationWarning, stacklevel=2)


def __getattr__(name):
    return getattr(_renamed, name)
