"""The README files' example commands and blocks, read from the files as a user reads them."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READMES = (ROOT / "README.md", *sorted(ROOT.glob("plugins/*/README.md")), *sorted(ROOT.glob("docs/**/README.md")))


@dataclass(frozen=True)
class Command:
    """One ``agentcompass ...`` command of a README: where it is and its arguments after ``agentcompass``."""

    readme: str
    line: int
    text: str

    @property
    def argv(self) -> list[str]:
        words = shlex.split(self.text.split("#", 1)[0] if " #" in self.text else self.text)
        return words[words.index("agentcompass") + 1:]


def commands(readmes: tuple[Path, ...] = READMES) -> list[Command]:
    """Every ``agentcompass`` command of an indented or fenced code block, continuation lines joined."""
    found: list[Command] = []
    for readme in readmes:
        lines = readme.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            start = i
            if re.match(r"^\s+(uv run )?agentcompass |^\s*(uv run )?agentcompass ", line) and (
                    line.startswith("    ") or _in_fence(lines, i)):
                text = line.strip()
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text[:-1].rstrip() + " " + lines[i].strip()
                found.append(Command(str(readme.relative_to(ROOT)), start + 1, _strip_comment(text)))
            i += 1
    return found


def _in_fence(lines: list[str], index: int) -> bool:
    return sum(1 for line in lines[:index] if line.strip().startswith("```")) % 2 == 1


def _strip_comment(text: str) -> str:
    """The command without a trailing shell comment (``  # ...`` outside quotes)."""
    out, quote = [], None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i > 0 and text[i - 1] == " ":
            break
        out.append(ch)
    return "".join(out).strip()


def suite_toml(readme: Path = ROOT / "README.md") -> str:
    """The README's example suite file (the block after ``<!-- suite.toml -->``)."""
    text = readme.read_text(encoding="utf-8")
    block = text[text.index("<!-- suite.toml -->"):]
    return block.split("```toml\n", 1)[1].split("```", 1)[0]
