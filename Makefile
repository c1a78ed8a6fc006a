# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both create .venv and install what they need; torch is pinned first so nothing pulls a CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST_PATH := $(PATH)
export USER ?= traincard
# Metaflow takes no user name from an empty USER or from root (a root container's): it is given one.
ifeq ($(filter-out root,$(strip $(USER))),)
export METAFLOW_USER ?= traincard
endif
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test venv system-packages lint bench screenshots gpu-check gpu-wheels

EXTRAS := metaflow,hf,lightning,accelerate,gpu,otlp,prometheus,instrument,store,notebook,bench,dev

# torch comes first, from pip, which finds the machine's CPU wheel; the rest from uv, which
# downloads and compiles in parallel (about 30 s instead of pip's 70 on two cores) and keeps that
# torch; pip again if uv fails.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0 'uv>=0.9'
	$(BIN)/uv pip install -q --native-tls --python $(BIN)/python --compile-bytecode -e '.[$(EXTRAS)]' --config-settings editable_mode=compat \
	  || $(BIN)/pip install -q -e '.[$(EXTRAS)]' --config-settings editable_mode=compat
	touch $@

venv: $(BIN)/.installed

# Debian packages for the browser and Prometheus tests, each installed only when its command is
# missing (scripts/system-packages.sh; never npm beside a preinstalled Node.js), and Azurite (the
# Azure Blob emulator) from npm into ./node_modules for the Azure store tests.
AZURITE_VERSION = 3.35.0

system-packages:
	@scripts/system-packages.sh
	@test -x node_modules/.bin/azurite-blob || npm install --prefix . --no-save --no-package-lock --no-audit --no-fund azurite@$(AZURITE_VERSION) >/dev/null

demo: venv
	cd examples && $(abspath $(BIN))/python hf_finetune_flow.py run
	@echo
	@echo "See the card:  cd examples && ../$(BIN)/python hf_finetune_flow.py card view train"
	@echo "Live, during a run (in a second terminal): cd examples && ../$(BIN)/python hf_finetune_flow.py card server  -> http://localhost:8324"

# pytest-xdist workers: three on two cores (docs/testing.md says why).
TEST_WORKERS ?= 3

# On a fresh machine pip's downloads and apt's installs take minutes each: they run side by side.
# The suite starts well over a thousand Python processes that import this package (flows' tasks,
# their live cards, ranks); where PYTHONDONTWRITEBYTECODE is set, as on the project's machines,
# each would compile it anew: its bytecode is written once, here.
test:
	@$(MAKE) --no-print-directory -j2 venv system-packages
	@$(BIN)/python -m compileall -q traincard_otel tests examples benchmarks
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: venv
	$(BIN)/ruff check traincard_otel tests benchmarks examples
	$(BIN)/mypy

bench: venv
	$(BIN)/python -m benchmarks

# The README's pictures, from real runs of the demo (a healthy one and a failing one).
screenshots:
	@$(MAKE) --no-print-directory -j2 venv system-packages
	$(BIN)/python docs/img/screenshots.py

# The GPU check (docs/performance.md): the tests marked gpu, on a machine with an NVIDIA GPU, in
# the Python that holds its CUDA torch, transformers and NVML (GPU_PY, looked up without .venv),
# not in .venv. What that Python lacks of our dependencies is installed into GPU_SITE from the
# wheels in GPU_WHEELS (no index needed there), which `make gpu-wheels` fills where PyPI is reachable.
GPU_PY ?= python3
GPU_WHEELS ?= .gpu-wheels
GPU_SITE ?= build/gpu-site

gpu-wheels:
	$(PY) -m pip download -q --only-binary=:all: -d $(GPU_WHEELS) 'opentelemetry-sdk>=1.44,<2' 'psutil>=5.9'

gpu-check:
	@PATH="$(HOST_PATH)"; missing=""; \
	$(GPU_PY) -c "import opentelemetry.sdk" 2>/dev/null || missing="opentelemetry-sdk"; \
	$(GPU_PY) -c "import psutil" 2>/dev/null || missing="$$missing psutil"; \
	if [ -n "$$missing" ]; then \
	  ls $(GPU_WHEELS)/*.whl >/dev/null 2>&1 || { echo "gpu-check: $(GPU_PY) lacks $$missing and $(GPU_WHEELS)/ holds no wheels: run 'make gpu-wheels' where PyPI is reachable"; exit 1; }; \
	  $(GPU_PY) -m pip install -q --no-index --find-links $(GPU_WHEELS) --target $(GPU_SITE) --upgrade $$missing || exit 1; \
	fi; \
	PYTHONPATH="$(CURDIR):$(abspath $(GPU_SITE))" $(GPU_PY) -m pytest -q -s -rs -m gpu -p no:cacheprovider \
	  tests/integration/test_gpu_real.py tests/integration/test_gpu_gpt2.py tests/integration/test_gpu_anatomy.py
