"""Terminus 2's parsers, prompts and tmux key handling: ours against Harbor's.

* The parsers and prompt templates are Harbor's files, verbatim (ours carry a 3-line header).
* Property tests (hypothesis) of our parsers: an answer built from any keystrokes and waits parses back to
  them; no text makes a parser raise.
* With Harbor installed (the ``slow`` group): Harbor's parsers, output limit and tmux key batching, fed the same
  inputs as ours (hypothesis-generated), give the same results.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from agentcompass.errors import UsageError
from agentcompass_harnesses.terminus2 import prompts
from agentcompass_harnesses.terminus2.harness import Terminus2Harness
from agentcompass_harnesses.terminus2.json_parser import TerminusJSONPlainParser
from agentcompass_harnesses.terminus2.tmux import TmuxSession
from agentcompass_harnesses.terminus2.xml_parser import TerminusXMLPlainParser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.export.test_atif_export import harbor_python  # noqa: F401  (the fixture)

OURS = Path(prompts.__file__).parent
HEADER_LINES = 3

keystrokes = st.text(alphabet=st.characters(codec="utf-8"), max_size=40).map(lambda s: s + "\n")
durations = st.sampled_from([0.1, 0.5, 1.0, 5.0, 30.0])
commands = st.lists(st.tuples(keystrokes, durations), max_size=4)


def json_answer(cmds: list[tuple[str, float]], complete: bool) -> str:
    return json.dumps({"analysis": "a", "plan": "p",
                       "commands": [{"keystrokes": k, "duration": d} for k, d in cmds], "task_complete": complete})


@given(commands, st.booleans())
def test_a_json_answer_parses_back_to_its_commands(cmds: list[tuple[str, float]], complete: bool) -> None:
    result = TerminusJSONPlainParser().parse_response(json_answer(cmds, complete))
    assert result.error == ""
    assert [(c.keystrokes, c.duration) for c in result.commands] == cmds
    assert result.is_task_complete is complete and (result.analysis, result.plan) == ("a", "p")


xml_keystrokes = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>&\r"),
                         max_size=40).map(lambda s: s.strip() + "\n")


@given(st.lists(st.tuples(xml_keystrokes, durations), max_size=4), st.booleans())
def test_an_xml_answer_parses_back_to_its_commands(cmds: list[tuple[str, float]], complete: bool) -> None:
    body = "".join(f'<keystrokes duration="{d}">{k}</keystrokes>\n' for k, d in cmds)
    answer = (f"<response>\n<analysis>a</analysis>\n<plan>p</plan>\n<commands>\n{body}</commands>\n"
              f"<task_complete>{'true' if complete else 'false'}</task_complete>\n</response>")
    result = TerminusXMLPlainParser().parse_response(answer)
    assert result.error == "", result.error
    assert [(c.keystrokes, c.duration) for c in result.commands] == cmds
    assert result.is_task_complete is complete


@given(st.text(max_size=300))
def test_no_text_makes_a_parser_raise(answer: str) -> None:
    for parser in (TerminusJSONPlainParser(), TerminusXMLPlainParser()):
        result = parser.parse_response(answer)
        assert isinstance(result.error, str) and isinstance(result.commands, list)


@given(st.text(max_size=400), st.integers(min_value=8, max_value=300))
def test_the_output_limit_keeps_head_and_tail(output: str, limit: int) -> None:
    limited = prompts.limit_output_length(output, limit)
    if len(output.encode()) <= limit:
        assert limited == output
    else:
        assert f"[... output limited to {limit} bytes;" in limited


def test_bad_options_are_one_line_errors() -> None:
    with pytest.raises(UsageError, match="option 'parser' must be json or xml, got 'yaml'"):
        Terminus2Harness(parser="yaml")
    with pytest.raises(UsageError, match="unknown option"):
        Terminus2Harness(max_episodes="3")
    assert Terminus2Harness(proactive_summarization_threshold="0").threshold == 0


# -- against Harbor's own code -------------------------------------------------------------------------------


def harbor_dir(python: str) -> Path:
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return Path(purelib) / "harbor" / "agents" / "terminus_2"


@pytest.mark.slow
def test_the_parsers_and_templates_are_harbors_verbatim(harbor_python: str) -> None:  # noqa: F811
    theirs = harbor_dir(harbor_python)
    for ours_name, their_name in (("json_parser.py", "terminus_json_plain_parser.py"),
                                  ("xml_parser.py", "terminus_xml_plain_parser.py")):
        lines = (OURS / ours_name).read_text().splitlines(keepends=True)
        assert "".join(lines[HEADER_LINES:]) == (theirs / their_name).read_text(), ours_name
    for template in ("terminus-json-plain.txt", "terminus-xml-plain.txt", "timeout.txt"):
        assert (OURS / "templates" / template).read_bytes() == (theirs / "templates" / template).read_bytes()


HARBOR_SIDE = r"""
import json, sys
from harbor.agents.terminus_2.terminus_2 import Terminus2
from harbor.agents.terminus_2.terminus_json_plain_parser import TerminusJSONPlainParser
from harbor.agents.terminus_2.terminus_xml_plain_parser import TerminusXMLPlainParser
from harbor.agents.terminus_2.tmux_session import TmuxSession
from dataclasses import asdict
cases = json.load(sys.stdin)
session = TmuxSession("terminus-2", None, "/logs/agent/terminus_2.pane", None, None)
out = {
    "json": [asdict(TerminusJSONPlainParser().parse_response(a)) for a in cases["answers"]],
    "xml": [asdict(TerminusXMLPlainParser().parse_response(a)) for a in cases["answers"]],
    "salvage": [list(TerminusXMLPlainParser().salvage_truncated_response(a)) for a in cases["answers"]],
    "limit": [Terminus2._limit_output_length(None, o, n) for o, n in cases["outputs"]],
    "prepare": [list(session._prepare_keys(k, b)) for k, b in cases["keys"]],
    "batches": [session._batch_keys_for_send(k) for k, _ in cases["keys"]],
    "start": session._tmux_start_session,
}
print(json.dumps(out))
"""

#: Answers that exercise the parsers' repairs and warnings.
TRICKY = [
    '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n"}]}',
    'Sure! {"analysis": "a", "plan": "p", "commands": [], "task_complete": "true"} thanks',
    '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 1}]',
    '{"plan": "p", "analysis": "a", "commands": [{"keystrokes": "ls", "duration": "x"}], "extra": 1}',
    '<response><analysis>a</analysis><plan>p</plan><commands><keystrokes duration="0.1">ls\n</keystrokes>'
    '</commands><task_complete/></response>',
    '<analysis>a</analysis><plan>p</plan><commands><keystrokes>cat <<EOF\nx & y\nEOF\n</keystrokes></commands>',
    '<response><analysis>a</analysis><plan>p</plan><commands><keystrokes duration="1">ls\n</keystrokes>'
    '<keystrokes duration="2">pw',
    '', '{}', '[]', '{"analysis": 1, "plan": [], "commands": {}}', '<response></response>',
]

answer_fragments = st.sampled_from(['{', '}', '[', ']', '"analysis": "a"', '"plan": "p"', '"commands": [',
                                    '{"keystrokes": "ls\\n", "duration": 0.1}', '"task_complete": true', ',',
                                    '<response>', '</response>', '<analysis>', '</analysis>', '<plan>x</plan>',
                                    '<commands>', '</commands>', '<keystrokes duration="0.5">', '</keystrokes>',
                                    '<task_complete>true</task_complete>', 'ls -la\n', ' text ', '\n'])
answers = st.one_of(st.lists(answer_fragments, max_size=14).map("".join), st.text(max_size=60),
                    st.sampled_from(TRICKY))
key_lists = st.lists(st.one_of(st.sampled_from(["Enter", "C-c", "C-m", "\n", "ls\n", "x" * 9000]), keystrokes),
                     max_size=4)


@pytest.mark.slow
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(answers, min_size=150, max_size=150), st.lists(st.tuples(st.text(max_size=300),
       st.integers(8, 200)), min_size=40, max_size=40), st.lists(st.tuples(key_lists, st.booleans()),
       min_size=40, max_size=40))
def test_ours_and_harbors_agree_on_the_same_inputs(harbor_python: str, generated: list[str],  # noqa: F811
                                                   outputs: list[tuple[str, int]],
                                                   keys: list[tuple[list[str], bool]]) -> None:
    cases: dict[str, Any] = {"answers": TRICKY + generated, "outputs": outputs, "keys": keys}
    done = subprocess.run([harbor_python, "-c", HARBOR_SIDE], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    session = TmuxSession(None, logging_path="/logs/agent/terminus_2.pane")  # type: ignore[arg-type]
    ours = {
        "json": [asdict(TerminusJSONPlainParser().parse_response(a)) for a in cases["answers"]],
        "xml": [asdict(TerminusXMLPlainParser().parse_response(a)) for a in cases["answers"]],
        "salvage": [list(TerminusXMLPlainParser().salvage_truncated_response(a)) for a in cases["answers"]],
        "limit": [prompts.limit_output_length(o, n) for o, n in outputs],
        "prepare": [list(session._prepare_keys(k, b)) for k, b in keys],
        "batches": [session._batch_keys_for_send(k) for k, _ in keys],
        "start": session._tmux_start_session,
    }
    ours = json.loads(json.dumps(ours))
    for part in ours:
        assert ours[part] == theirs[part], part
