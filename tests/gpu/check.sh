#!/usr/bin/env bash
# The device check (tests/gpu/check.py): one markdown table of what our GPU paths measure on this machine.
#
#   tests/gpu/check.sh            on a GPU machine (python3 with CUDA torch and transformers, no network)
#   tests/gpu/check.sh --cpu      the dry mode: tiny shapes on the CPU (CI runs it)
#
# Wheels or sdists in tests/gpu/wheels/ (deepspeed's sdist, say) are installed offline first when their
# module is missing.
# The table is printed and, when OUT is set, written to $OUT/gpu-check.md. Exit status 1: a section failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# The interpreter: $PYTHON, else the repository's .venv or python3, on a GPU run the first whose torch
# sees CUDA (a .venv copied from a CPU machine has the CPU wheel).
if [[ -z "${PYTHON:-}" ]]; then
    candidates=()
    [[ -x "$root/.venv/bin/python" ]] && candidates+=("$root/.venv/bin/python")
    candidates+=(python3)
    PYTHON="${candidates[0]}"
    if [[ " $* " != *" --cpu "* ]]; then
        for candidate in "${candidates[@]}"; do
            if "$candidate" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2> /dev/null; then
                PYTHON="$candidate"
                break
            fi
        done
    fi
fi

# Packages the machine lacks travel as files (no network there): install each one whose module is
# missing (the name before the file's first "-": deepspeed-0.19.8.tar.gz is deepspeed), from wheels/ only.
missing=()
for file in "$here"/wheels/*; do
    [[ -f "$file" ]] || continue
    name="$(basename "$file")"
    name="${name%%-*}"
    "$PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)" \
        "${name//./_}" 2> /dev/null || missing+=("$file")
done
if (( ${#missing[@]} )); then
    # no build isolation: an sdist builds with the installed setuptools and torch (nothing to download)
    "$PYTHON" -m pip install --no-index --no-build-isolation --find-links "$here/wheels" "${missing[@]}" \
        || echo "check.sh: installing ${missing[*]} failed; the sections that need them will say so" >&2
fi

export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # everything is built locally
if [[ " $* " == *" --cpu "* ]]; then
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # CI: shared cores
fi
exec "$PYTHON" -m tests.gpu.check "$@"
