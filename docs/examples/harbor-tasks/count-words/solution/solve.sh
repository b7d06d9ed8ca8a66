#!/bin/bash
wc -w < /app/input.txt | tr -d ' ' > /app/count.txt
