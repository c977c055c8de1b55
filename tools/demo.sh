#!/usr/bin/env bash
# Quick start: installs what is needed, builds the demo and trains it (progress every 50 steps).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build --noshow_progress //tools/examples:fit_demo
exec bazel-bin/tools/examples/fit_demo "$@"
