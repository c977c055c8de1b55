#!/usr/bin/env bash
# Installs the Debian packages Tessera's build, tests and benchmarks need. Idempotent: when every
# package is present it only checks and returns in about a second.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-rules-java bazel-platforms     # offline Bazel 4.2.3 and its local rules
  g++ libeigen3-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2
  libopenmpi-dev openmpi-bin                           # multi-process launch and CPU collectives
  python3-torch python3-numpy libopenblas0-openmp      # reference values and the benchmark peer
  python3-matplotlib                                   # tools/plot_metrics.py
  python3-regex                                        # \p{L}/\p{N} for the GPT-2 BPE reference (tests/models/data)
  libstb-dev                                           # stb_image: PNG/JPEG/BMP decoding (models/data)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
