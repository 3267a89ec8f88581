# Two commands on a fresh machine:
#   make demo   set up .venv, index the bundled example corpus, answer its questions, print recall and timing
#   make test   set up .venv, lint (ruff) and run the fast test tier (plus one end-to-end quality test on ../shared/data)
# and, when there is time:
#   make test-all   everything, the slow tier included (real transformer/spaCy builds of the shared datasets)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines: the CPU build of torch must be installed before sentence-transformers,
# or pip pulls a multi-GB CUDA build. Override on machines that already have torch: make TORCH_SPEC= test
TORCH_SPEC ?= torch==2.13.0
EXAMPLE_INDEX := .cache/example-index

# Test tiers, by marker (pyproject.toml): `make test` deselects `slow`; `make test-all` runs everything.
# `make test-reliability` and `make test-gpu` run the reliability suite and the CuPy cases alone.
# Two pytest-xdist workers, one test file each at a time (module fixtures are built once): the fast tier
# took 261 s against 326-370 s serially on 2 cores; `make test XDIST=` runs in one process.
# PYTEST_ARGS adds options, e.g. make test PYTEST_ARGS="-x -k stream".
XDIST ?= -n 2 --dist loadfile
PYTEST := $(BIN)/python -m pytest -q -ra
PYTEST_ARGS ?=

.PHONY: setup demo lint test test-all test-slow test-reliability test-gpu bench-list bench-quality bench-throughput clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(TORCH_SPEC),$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)")
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	touch $@

demo: setup
	$(BIN)/tigrag index examples/corpus.json -o $(EXAMPLE_INDEX)
	$(BIN)/tigrag eval $(EXAMPLE_INDEX) examples/questions.json
	$(BIN)/tigrag query $(EXAMPLE_INDEX) "Where was the director of the film The Glass Orchard born?"

# Every file must compile and have no undefined name (ruff, configured in pyproject.toml).
lint: setup
	$(BIN)/ruff check gpu_tigrag kernels bench tests

test: lint
	$(PYTEST) $(XDIST) -m "not slow" $(PYTEST_ARGS)

test-all: lint
	$(PYTEST) $(XDIST) $(PYTEST_ARGS)

# The slow tier alone (CI runs it after `make test`, so the two add up to `make test-all`).
test-slow: setup
	$(PYTEST) $(XDIST) -m slow $(PYTEST_ARGS)

test-reliability: setup
	$(PYTEST) -m reliability $(PYTEST_ARGS)

test-gpu: setup
	$(PYTEST) -m gpu $(PYTEST_ARGS)

bench-list: setup
	$(BIN)/python -m bench list

bench-quality: setup
	$(BIN)/python -m bench run quality

bench-throughput: setup
	$(BIN)/python -m bench run throughput

clean:
	rm -rf $(VENV) .cache .pytest_cache
