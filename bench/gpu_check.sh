#!/usr/bin/env bash
# One prepared GPU check (issue 8): every exportable registered model through host-CUDA,
# onnxrt (CUDA execution provider) and TensorRT fp32/fp16/int8; prints the packages it found
# (naming any that is missing), a parity table and a p50/p90/p99 latency table. Needs no
# internet. Finishes within 10 minutes: bench/gpu_check.py stops starting work after
# --budget-s (default 540 s) and this wrapper kills it at 590 s.
#
#   bash bench/gpu_check.sh [--out DIR] [--repeats N] [--models a,b] [--routes r1,r2] [--full]
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
    if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONUNBUFFERED=1
if ! "$PY" -c "import neuroedge" 2>/dev/null; then
    echo "neuroedge is not importable by $PY; installing this checkout (offline, no deps)"
    if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . ; then
        echo "gpu_check: cannot install neuroedge offline: $PY needs setuptools>=64 and pip" >&2
        exit 2
    fi
fi
# module[:pip name]: what every route imports, then what the checked models import (neuroedge
# was installed without deps): scikit-learn and scipy (the digits of snn.lif_convnet and
# snn.unisparse), numba (event.bivision). The route-specific ones (onnxruntime-gpu, tensorrt)
# are reported in gpu_check's package table and block only their routes.
for entry in numpy torch onnx tqdm matplotlib sklearn:scikit-learn scipy numba; do
    pkg="${entry%%:*}"
    pip="${entry#*:}"
    if ! "$PY" -c "import $pkg" 2>/dev/null; then
        echo "gpu_check: Python package '$pip' is missing for $PY (pip install $pip)" >&2
        exit 2
    fi
done
exec timeout --signal=INT --kill-after=5 590 "$PY" -m neuroedge.bench.gpu_check "$@"
