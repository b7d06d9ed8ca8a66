"""Model prices, for the cost of each metered call.

Prices are USD per one million tokens, input (prompt) and output (completion). The built-in table is a small
**example** of list prices at the time of writing — check your provider's current prices and override them.
Users extend or override it with a JSON file, given by ``--prices FILE`` or ``AGENTCOMPASS_PRICES``::

    {
      "openai/gpt-4o-mini": {"input": 0.15, "output": 0.60},
      "Qwen3-8B": {"input": 0, "output": 0}
    }

A key is ``provider/name`` or a bare model ``name``. Lookup tries the exact ``provider/name``, then the
name, then the longest key that the name starts with (so dated snapshots such as ``gpt-4o-2024-08-06`` find
``gpt-4o``). A model with no price has no cost: it is metered in tokens only. The built-in offline ``mock``
(:data:`FREE_PROVIDERS`) costs 0.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError

PRICES_ENV = "AGENTCOMPASS_PRICES"


@attrs.frozen
class Price:
    """USD per one million input and output tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


#: EXAMPLE list prices (USD / 1M tokens) of a few well-known models. Check them before relying on a cost.
BUILTIN_PRICES: dict[str, Price] = {
    "openai/gpt-4o": Price(2.50, 10.00),
    "openai/gpt-4o-mini": Price(0.15, 0.60),
    "openai/gpt-4.1": Price(2.00, 8.00),
    "openai/gpt-4.1-mini": Price(0.40, 1.60),
    "openai/gpt-4.1-nano": Price(0.10, 0.40),
    "openai/o3-mini": Price(1.10, 4.40),
    "openai/o4-mini": Price(1.10, 4.40),
    "anthropic/claude-3-5-haiku": Price(0.80, 4.00),
    "anthropic/claude-3-5-sonnet": Price(3.00, 15.00),
    "anthropic/claude-3-7-sonnet": Price(3.00, 15.00),
    "anthropic/claude-sonnet-4": Price(3.00, 15.00),
    "anthropic/claude-opus-4": Price(15.00, 75.00),
    # The same models on the clouds (Bedrock model ids, Vertex names): a region-prefixed inference profile
    # (us.anthropic...) or an Azure deployment (named by its owner) needs a --prices entry.
    "bedrock/anthropic.claude-3-5-haiku": Price(0.80, 4.00),
    "bedrock/anthropic.claude-3-5-sonnet": Price(3.00, 15.00),
    "bedrock/anthropic.claude-3-7-sonnet": Price(3.00, 15.00),
    "bedrock/anthropic.claude-sonnet-4": Price(3.00, 15.00),
    "bedrock/anthropic.claude-opus-4": Price(15.00, 75.00),
    "vertex/claude-3-5-haiku": Price(0.80, 4.00),
    "vertex/claude-3-7-sonnet": Price(3.00, 15.00),
    "vertex/claude-sonnet-4": Price(3.00, 15.00),
    "vertex/claude-opus-4": Price(15.00, 75.00),
}

#: Providers whose calls cost nothing whatever the table says: the built-in offline mock.
FREE_PROVIDERS = frozenset({"mock"})
FREE = Price(0.0, 0.0)


def _price(key: str, value: Any, source: str) -> Price:
    if not isinstance(value, Mapping) or not {"input", "output"} <= set(value):
        raise UsageError(f"price of {key!r} in {source} must be {{\"input\": USD, \"output\": USD}} per 1M tokens")
    try:
        price = Price(float(value["input"]), float(value["output"]))
    except (TypeError, ValueError):
        raise UsageError(f"price of {key!r} in {source}: input and output must be numbers") from None
    if not all(math.isfinite(x) and x >= 0 for x in (price.input, price.output)):
        raise UsageError(f"price of {key!r} in {source}: input and output must be finite and >= 0")
    return price


@attrs.define
class PriceTable:
    prices: dict[str, Price] = attrs.field(factory=lambda: dict(BUILTIN_PRICES))

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> PriceTable:
        """The built-in table, extended by ``path`` (or ``$AGENTCOMPASS_PRICES``) when given."""
        environ = os.environ if environ is None else environ
        table = cls()
        source = path or environ.get(PRICES_ENV)
        if source:
            table.update_from_file(Path(source))
        return table

    def update_from_file(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read the price file {path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise UsageError(f"price file {path} is not valid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise UsageError(f"price file {path} must hold a JSON object of model -> {{input, output}}")
        for key, value in data.items():
            self.prices[str(key)] = _price(str(key), value, str(path))

    def lookup(self, spec: str) -> Price | None:
        """The price of ``provider/name`` (or a bare name), or None."""
        if spec in self.prices:
            return self.prices[spec]
        if spec.partition("/")[0] in FREE_PROVIDERS:
            return FREE
        provider, _, name = spec.partition("/")
        if not name:
            provider, name = "", spec
        if name in self.prices:
            return self.prices[name]
        best: tuple[int, Price] | None = None
        for key, price in self.prices.items():
            key_provider, _, key_name = key.partition("/")
            if not key_name:
                key_provider, key_name = "", key
            if key_provider and key_provider != provider:
                continue
            if name.startswith(key_name) and (best is None or len(key_name) > best[0]):
                best = (len(key_name), price)
        return best[1] if best else None
