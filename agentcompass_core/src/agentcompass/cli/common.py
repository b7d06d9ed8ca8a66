"""What the commands share: the plugin host they run with (and the console observing it), and how they print
JSON."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import click

from agentcompass.plugins import PluginHost, load_plugins


def plugin_host(ctx: click.Context, include_skipped: bool = False) -> PluginHost:
    """The plugins: the host in ``obj`` (loaded by :func:`agentcompass.cli.main.main`, or passed by tests), else
    the installed ones."""
    obj = ctx.find_root().obj
    if isinstance(obj, dict) and obj.get("plugin_host") is not None and not (include_skipped and obj.get("loaded")):
        return obj["plugin_host"]
    return load_plugins(include_skipped=include_skipped)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


#: The name the console's observer plugin is registered under while a command runs.
CONSOLE_PLUGIN = "agentcompass-console"


@contextlib.contextmanager
def observing(host: PluginHost, observer: object, name: str = CONSOLE_PLUGIN) -> Iterator[None]:
    """``observer`` (an object with observer hookimpls, e.g. the console) registered on ``host`` for the ``with``
    block, then removed."""
    record = host.add_plugin(observer, name)
    if record.error:
        raise RuntimeError(f"the observer {name!r} did not register: {record.error}")
    try:
        yield
    finally:
        host.remove_plugin(name)
