# Two commands on a fresh machine:
#   make demo   set up .venv, index the bundled example corpus, answer its questions, print recall and timing
#   make test   set up .venv, lint (ruff) and run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines: the CPU build of torch must be installed before sentence-transformers,
# or pip pulls a multi-GB CUDA build. Override on machines that already have torch: make TORCH_SPEC= test
TORCH_SPEC ?= torch==2.13.0
EXAMPLE_INDEX := .cache/example-index

.PHONY: setup demo lint test bench-quality bench-throughput clean

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
	$(BIN)/ruff check gpu_tigrag bench tests

test: lint
	$(BIN)/python -m pytest -q -ra

bench-quality: setup
	$(BIN)/python bench/quality.py

bench-throughput: setup
	$(BIN)/python bench/throughput.py

clean:
	rm -rf $(VENV) .cache .pytest_cache
