"""Hidden tests of ``flatten``. Each ``test_*`` function gets the submitted module."""


def test_example(solution):
    assert solution.flatten([1, [2, (3, [4])], "ab", []]) == [1, 2, 3, 4, "ab"]


def test_flat_and_empty(solution):
    assert solution.flatten([]) == []
    assert solution.flatten([1, 2, 3]) == [1, 2, 3]
    assert solution.flatten([[], [[]], ()]) == []


def test_strings_are_atoms(solution):
    assert solution.flatten(["abc", ["de"], ("f",)]) == ["abc", "de", "f"]


def test_deep_nesting(solution):
    xs: list = [0]
    for i in range(1, 200):
        xs = [xs, i]
    assert solution.flatten(xs) == list(range(200))


def test_does_not_modify_input(solution):
    xs = [1, [2, [3]], (4,)]
    solution.flatten(xs)
    assert xs == [1, [2, [3]], (4,)]
