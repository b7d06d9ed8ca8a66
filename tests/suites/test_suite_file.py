"""The suite file: [defaults], [[run]], [matrix] with exclude and a name template; its errors name file and key."""

from __future__ import annotations

import math
import tomllib

import pytest
from agentcompass.suites.suite_file import FROM_MATRIX, FROM_RUN, SuiteFileError, expand, load_suite_file
from hypothesis import given
from hypothesis import strategies as st

GRID = """
baseline = "ec-react-e0"

[defaults]
model = "mock"
trials = 2
benchmark_args = { a = "1" }

[matrix]
benchmark = ["example_coding", "example_interactive"]
harness = ["react", "none"]
model_args = [{ error_rate = "0" }, { error_rate = "0.5" }]
name = "{benchmark[0]}{benchmark[8]}-{harness}-e{model_args[error_rate]}"
exclude = [{ benchmark = "example_coding", harness = "none" }]

[[run]]
name = "strict"
benchmark = "example_interactive"
harness = "none"
benchmark_args = { b = "2" }
"""


def test_a_grid_expands_with_defaults_exclude_and_names(tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(GRID)
    plan = load_suite_file(path)
    names = [c.name for c in plan.cells]
    assert names == ["strict", "ec-react-e0", "ec-react-e0.5", "ei-react-e0", "ei-react-e0.5", "ei-none-e0",
                     "ei-none-e0.5"]
    assert plan.excluded == ("ec-none-e0", "ec-none-e0.5")
    assert plan.baseline == "ec-react-e0"
    strict = plan.cells[0]
    assert strict.origin == FROM_RUN
    # tables merge key by key: the cell's benchmark_args add to the defaults'
    assert strict.options == {"model": "mock", "trials": 2, "benchmark_args": {"a": "1", "b": "2"},
                              "benchmark": "example_interactive", "harness": "none"}
    cell = plan.cells[2]
    assert cell.origin == FROM_MATRIX
    assert cell.options["model_args"] == {"error_rate": "0.5"} and cell.options["harness"] == "react"


def test_without_a_template_names_join_the_values():
    plan = expand({"matrix": {"benchmark": ["b1"], "model": ["openai/gpt-4o", "mock"],
                              "model_args": [{"error_rate": "0.1"}]}}, "s.toml")
    assert [c.name for c in plan.cells] == ["b1-openai_gpt-4o-error_rate=0.1", "b1-mock-error_rate=0.1"]


@pytest.mark.parametrize(("data", "message"), [
    ({"defaults": {"model": "mock"}, "runs": []}, "unknown key 'runs'"),
    ({"run": [{"benchmark": "x"}]}, "[[run]] number 1 has no name"),
    ({"run": [{"name": "a/b"}]}, "cannot be a directory name"),
    ({"run": [{"name": "a"}, {"name": "a"}]}, "'a' is used 2 times"),
    ({"matrix": {"benchmark": "x"}}, "[matrix] benchmark must be a non-empty list"),
    ({"matrix": {"benchmark": ["x"], "exclude": [{"harness": "y"}]}}, "exclude names 'harness'"),
    ({"matrix": {"benchmark": ["x"], "name": "{nope}"}}, "'nope' is not an option of the cell"),
    ({"matrix": {"benchmark": ["x", "y"], "name": "same"}}, "'same' is used 2 times"),
    ({"run": [{"name": "a"}], "baseline": "b"}, "baseline 'b' is not a cell"),
    ({"defaults": {"name": "x"}, "run": [{"name": "a"}]}, "[defaults] cannot set 'name'"),
    ({}, "has no cells"),
])
def test_shape_errors_name_the_file_and_the_key(data, message):
    with pytest.raises(SuiteFileError) as err:
        expand(data, "my-suite.toml")
    assert "my-suite.toml" in str(err.value) and message in str(err.value)


def test_a_file_that_is_not_toml_is_a_clear_error(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[matrix\n")
    with pytest.raises(SuiteFileError, match=r"s\.toml is not valid TOML"):
        load_suite_file(path)
    with pytest.raises(SuiteFileError, match="cannot read suite file"):
        load_suite_file(tmp_path / "missing.toml")


values = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True)


@given(st.dictionaries(st.sampled_from(["benchmark", "harness", "model", "env"]), values, min_size=1),
       st.data())
def test_the_matrix_is_the_product_minus_the_excluded(matrix, data):
    key = data.draw(st.sampled_from(sorted(matrix)))
    dropped = data.draw(st.sampled_from(matrix[key]))
    plan_data = {"matrix": {**matrix, "exclude": [{key: dropped}]}}
    total = math.prod(len(v) for v in matrix.values())
    if len(matrix[key]) == 1:  # every combination has the excluded value
        with pytest.raises(SuiteFileError, match="has no cells"):
            expand(plan_data, "s.toml")
        return
    plan = expand(plan_data, "s.toml")
    assert len(plan.cells) + len(plan.excluded) == total
    assert len(plan.excluded) == total // len(matrix[key])
    assert all(c.options[key] != dropped for c in plan.cells)
    combos = {tuple(c.options[k] for k in matrix) for c in plan.cells}
    assert len(combos) == len(plan.cells)  # every cell is a distinct combination


def test_the_readme_suite_parses():
    from tests.helpers.cli_processes import ROOT

    text = (ROOT / "README.md").read_text()
    start = text.index("<!-- suite.toml -->")
    block = text[text.index("```toml", start) + len("```toml"):text.index("```", text.index("```toml", start) + 7)]
    plan = expand(tomllib.loads(block), "README suite.toml")
    assert len(plan.cells) >= 4
