_NUMERALS = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]


def roman(n):
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 3999:
        raise ValueError(f"roman numerals cover 1..3999, got {n!r}")
    parts = []
    for value, symbol in _NUMERALS:
        count, n = divmod(n, value)
        parts.append(symbol * count)
    return "".join(parts)
