def merge_intervals(xs):
    merged: list = []
    for start, end in sorted(xs):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
