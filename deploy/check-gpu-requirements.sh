#!/bin/sh
# Checks that the GPU install, requirements-gpu.txt, is one consistent set: pip resolves every pin of it
# together (torch, transformers and numpy as vLLM needs them, vLLM itself and the rest as on CPU)
# without installing anything. Needs the package index (vLLM and CUDA torch wheels are large: pip may
# fetch them to read their metadata). Exit status 0 when it resolves, pip's own (non-zero) otherwise.
#   deploy/check-gpu-requirements.sh            # with this shell's python
#   PYTHON=.venv/bin/python deploy/check-gpu-requirements.sh
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
"$PYTHON" -m pip install --dry-run --ignore-installed --quiet --report "$report" -r requirements-gpu.txt
"$PYTHON" - "$report" <<'PY'
import json
import sys

with open(sys.argv[1]) as report:
    installs = json.load(report)["install"]
picked = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installs}
names = ("vllm", "torch", "transformers", "numpy")
print("requirements-gpu.txt resolves:", ", ".join(f"{name} {picked[name]}" for name in names))
PY
