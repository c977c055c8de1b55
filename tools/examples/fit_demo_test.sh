#!/usr/bin/env bash
# Runs the demo for 200 steps and checks that it learns: final accuracy above 90%.
set -euo pipefail
out=$(tools/examples/fit_demo 200)
echo "$out"
acc=$(echo "$out" | tail -n 1 | sed -E 's/.*accuracy +([0-9.]+)%.*/\1/')
awk -v a="$acc" 'BEGIN { exit !(a > 90.0) }' || { echo "accuracy $acc% is not above 90%"; exit 1; }
