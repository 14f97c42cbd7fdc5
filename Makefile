# graphprof: `make run` profiles resnet18, `make test` runs the test suite, `make lint` runs ruff, mypy and the bar on repeated code
# (each installs first when needed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.graphprof-installed

.PHONY: install run test test-fast lint bench clean graphviz system-deps

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# torch and torchvision first, at the versions this machine holds on disk (a CUDA build that runs on the CPU)
	$(PY) -m pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install --quiet -e '.[all,test]'
	$(MAKE) --no-print-directory system-deps
	touch $(STAMP)

# Graphviz (`dot`: --graph .svg/.png and the HTML report's module graph) and Chromium (the HTML report's
# browser tests), from the distribution where they are missing and it can install them (root, apt-get);
# otherwise one line says how. Never fails the install: what needs them says so, or its tests skip.
system-deps:
	@if command -v dot >/dev/null && command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz chromium >/dev/null) \
	  || echo "graphprof: apt-get could not install graphviz and chromium; --graph .svg/.png and the HTML tests need them"; \
	else echo "graphprof: for --graph .svg/.png and the HTML report's tests, install Graphviz and Chromium (apt-get install graphviz chromium, brew install graphviz chromium)"; fi

run: install
	$(VENV)/bin/graphprof --model resnet18

test: install
	$(PY) -m pytest -q

# the fast tier: everything but the tests marked slow (zoo-wide, subprocesses, real runs)
test-fast: install
	$(PY) -m pytest -q -m "not slow"

# ruff (lint and format), mypy --strict on graphprof/ (configured in pyproject.toml [tool.mypy]), and the bar on
# repeated code (scripts/check_duplicates.sh: needs the duplicates tool, says so where it is missing)
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	bash scripts/check_duplicates.sh

bench: install
	$(PY) benchmarks/bench_capture.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# SVG/PNG graph exports (`graphprof --graph g.svg`) need Graphviz's `dot`; .json/.dot/.txt do not.
graphviz:
	apt-get install -y graphviz || brew install graphviz
