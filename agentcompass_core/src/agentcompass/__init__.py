"""agentcompass: an evaluation runtime for LLM agents.

Plugin authors import the public API from :mod:`agentcompass.runtime` and mark hook implementations with
:data:`hookimpl`.
"""

from agentcompass.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]
