"""Writing one plugin package from its kind's templates (:mod:`agentcompass.scaffold.templates`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from agentcompass import __version__
from agentcompass.errors import UsageError
from agentcompass.scaffold import templates

#: The kinds of plugin ``agentcompass new`` writes.
KINDS: tuple[str, ...] = tuple(templates.FILES)

_NAME = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*")


@dataclass(frozen=True)
class PluginNames:
    """The names of one plugin: ``name`` (what ``agentcompass run`` takes and the entry point), ``distribution``
    (``pip install``), ``package`` (``import``) and ``class_name`` (the implementation's class)."""

    kind: str
    name: str
    distribution: str
    package: str
    class_name: str


def plugin_names(kind: str, name: str) -> PluginNames:
    """The names of a ``kind`` plugin called ``name``; a :class:`UsageError` for an unknown kind or a name that
    is not lowercase letters, digits, ``_`` and ``-`` starting with a letter."""
    if kind not in templates.FILES:
        raise UsageError(f"unknown plugin kind {kind!r}; choose one of {', '.join(KINDS)}")
    if not _NAME.fullmatch(name):
        raise UsageError(f"plugin name {name!r} is not valid: use lowercase letters, digits, '_' and '-', starting "
                         "with a letter (e.g. 'my_bench')")
    words = re.split(r"[_-]", name)
    suffix = {"benchmark": "Benchmark", "harness": "Harness", "environment": "Provider"}[kind]
    return PluginNames(kind=kind, name=name, distribution="agentcompass-" + "-".join(words),
                       package="agentcompass_" + "_".join(words),
                       class_name="".join(w.capitalize() for w in words) + suffix)


def render(text: str, names: PluginNames) -> str:
    """A template's text with its placeholders filled in."""
    values = {"__NAME__": names.name, "__DIST__": names.distribution, "__PACKAGE__": names.package,
              "__CLASS__": names.class_name, "__KIND__": names.kind, "__CORE_VERSION__": __version__}
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def write_plugin(kind: str, name: str, directory: Path) -> Path:
    """Write the ``kind`` plugin ``name`` as a new package directory under ``directory`` (named after its
    distribution) and return that directory. Refuses (:class:`UsageError`) to write into one that exists."""
    names = plugin_names(kind, name)
    root = Path(directory) / names.distribution
    if root.exists():
        raise UsageError(f"{root} already exists: choose another NAME or --dir, or remove it first")
    for relative, text in {**templates.COMMON, **templates.FILES[kind]}.items():
        target = root / render(relative, names)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(text, names).lstrip("\n"))
    return root
