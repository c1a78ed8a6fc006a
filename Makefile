# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both create .venv and install what they need; torch is pinned first so nothing pulls a CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export USER ?= traincard
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test venv system-packages lint bench screenshots

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[metaflow,hf,lightning,accelerate,gpu,otlp,prometheus,store,notebook,bench,dev]' --config-settings editable_mode=compat
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

# On pytest-xdist workers, two per core (tests/conftest.py; PYTEST_XDIST_AUTO_NUM_WORKERS=N to choose).
test: venv system-packages
	$(BIN)/python -m pytest -q -n auto

lint: venv
	$(BIN)/ruff check traincard_otel tests benchmarks examples
	$(BIN)/mypy

bench: venv
	$(BIN)/python -m benchmarks

# The README's pictures, from real runs of the demo (a healthy one and a failing one).
screenshots: venv system-packages
	$(BIN)/python docs/img/screenshots.py
