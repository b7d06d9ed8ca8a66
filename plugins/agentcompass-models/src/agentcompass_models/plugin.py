"""The ``models`` plugin: registers the ``openai``, ``openai-compatible``, ``anthropic`` and ``gemini`` model
providers, and the cloud ones: ``azure`` (Azure OpenAI), ``bedrock`` (Amazon Bedrock), ``vertex`` (Vertex AI).

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


def azure(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.azure import make_azure

    return make_azure(name, settings=settings, **options)


def bedrock(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.bedrock import make_bedrock

    return make_bedrock(name, settings=settings, **options)


def vertex(name: str = "", *, settings: Any = None, **options: Any) -> Any:
    from agentcompass_models.vertex import make_vertex

    return make_vertex(name, settings=settings, **options)


@hookimpl
def register_models(register):
    register("openai", openai)
    register("openai-compatible", openai_compatible)
    register("anthropic", anthropic)
    register("gemini", gemini)
    register("azure", azure)
    register("bedrock", bedrock)
    register("vertex", vertex)
