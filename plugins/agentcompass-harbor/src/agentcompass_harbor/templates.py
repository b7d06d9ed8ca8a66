"""``${VAR}`` and ``${VAR:-default}`` in ``task.toml``'s ``env`` tables, as Harbor resolves them from the host.

A task may only take a host variable the user allowed with ``-b pass_env=VAR,...`` (Harbor asks for approval
instead): agentcompass never passes the host's variables — provider keys among them — into an environment
unasked. Without the approval the ``:-default`` is used, and a variable without one is an error naming the
option.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class TemplateError(ValueError):
    pass


def resolve(values: Mapping[str, str], *, allowed: Collection[str], host: Mapping[str, str], where: str
            ) -> dict[str, str]:
    """``values`` with every ``${VAR}`` replaced."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in allowed and name in host:
            return host[name]
        if default is not None:
            return default
        if name not in allowed:
            raise TemplateError(f"{where} needs ${{{name}}} from this machine's environment: allow it with "
                                f"-b pass_env={name}")
        raise TemplateError(f"{where} needs ${{{name}}}, which is not set in this machine's environment")

    return {key: _TEMPLATE.sub(substitute, value) for key, value in values.items()}
