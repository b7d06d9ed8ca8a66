import re
from collections import Counter


def word_count(text):
    return dict(Counter(w.lower() for w in re.findall(r"[A-Za-z0-9]+", text)))
