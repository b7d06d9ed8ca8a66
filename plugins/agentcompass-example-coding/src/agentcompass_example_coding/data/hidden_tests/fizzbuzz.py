"""Hidden tests of ``fizzbuzz``. Each ``test_*`` function gets the submitted module."""


def test_first_fifteen(solution):
    assert solution.fizzbuzz(15) == [
        "1",
        "2",
        "Fizz",
        "4",
        "Buzz",
        "Fizz",
        "7",
        "8",
        "Fizz",
        "Buzz",
        "11",
        "Fizz",
        "13",
        "14",
        "FizzBuzz",
    ]


def test_one(solution):
    assert solution.fizzbuzz(1) == ["1"]


def test_empty(solution):
    assert solution.fizzbuzz(0) == []
    assert solution.fizzbuzz(-3) == []


def test_length_and_types(solution):
    out = solution.fizzbuzz(100)
    assert isinstance(out, list) and len(out) == 100
    assert all(isinstance(x, str) for x in out)


def test_large(solution):
    out = solution.fizzbuzz(300)
    for i in range(1, 301):
        expected = "FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i)
        assert out[i - 1] == expected, (i, out[i - 1])
