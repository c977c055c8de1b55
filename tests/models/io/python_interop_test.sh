#!/bin/bash
# Runs python_interop.py (Debian's python3 with numpy) against the C++ safetensors tool.
set -euo pipefail
tool="$1"
script="$2"
exec /usr/bin/python3 "$script" "$tool"
