"""Running model-written code in a scratch directory with limits.
"""

from ._local import SandboxLimits as SandboxLimits
from ._local import SandboxResult as SandboxResult
from ._local import run_sandboxed as run_sandboxed
