#!/bin/bash
# The verdict: 1 when /app/count.txt holds the number of words of /app/input.txt, else 0.
expected=$(wc -w < /app/input.txt | tr -d ' ')
found=$(tr -d ' \n' < /app/count.txt 2>/dev/null)
if [ -n "$found" ] && [ "$found" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "expected $expected in /app/count.txt, found: ${found:-nothing}"
  echo 0 > /logs/verifier/reward.txt
fi
