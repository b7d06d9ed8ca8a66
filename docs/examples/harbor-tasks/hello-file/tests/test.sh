#!/bin/bash
# The verdict: 1 when /app/hello.txt holds exactly the line `hello`, else 0.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "expected /app/hello.txt to hold 'hello', found: $(cat /app/hello.txt 2>&1)"
  echo 0 > /logs/verifier/reward.txt
fi
