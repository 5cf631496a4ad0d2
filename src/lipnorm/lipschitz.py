"""Deprecated: renamed `lipnorm.lipschitz_probe` (the empirical Lipschitz probe).

Importing this module warns (`DeprecationWarning`) and gives `lipnorm.lipschitz_probe`'s names.
"""

import warnings

from lipnorm import lipschitz_probe as _renamed
from lipnorm.lipschitz_probe import *  # noqa: F401,F403

warnings.warn("lipnorm.lipschitz is deprecated: import lipnorm.lipschitz_probe instead", DeprecationWarning,
              stacklevel=2)


def __getattr__(name):
    return getattr(_renamed, name)
