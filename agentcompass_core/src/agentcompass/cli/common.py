"""What the commands share: the plugin host they run with, and how they print JSON."""

from __future__ import annotations

import json
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
