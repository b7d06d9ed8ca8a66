"""The ``models`` plugin: registers the ``openai``, ``openai-compatible``, ``anthropic`` and ``gemini`` model
providers.

Imports stay cheap (``agentcompass plugins list`` must start fast): each factory imports aiohttp and its
provider module only when a run builds a client.
"""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl


def openai(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.openai import make_openai

    return make_openai(name, settings=settings, **options)


def openai_compatible(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.openai import make_openai_compatible

    return make_openai_compatible(name, settings=settings, **options)


def anthropic(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.anthropic import make_anthropic

    return make_anthropic(name, settings=settings, **options)


def gemini(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.gemini import make_gemini

    return make_gemini(name, settings=settings, **options)


@hookimpl
def register_models(register):
    register("openai", openai)
    register("openai-compatible", openai_compatible)
    register("anthropic", anthropic)
    register("gemini", gemini)
