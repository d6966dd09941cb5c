# dshkit developer commands. Every target works on a fresh clone: it creates .venv itself.
#   make demo   run the offline demonstration (python -m dshkit demo)
#   make test   cargo test, the release wheel, stubtest and the pytest suite
#   make bench  release build + pytest-benchmark suites, then the ratio table
#   make wheel  release wheel and sdist into dist/

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export VIRTUAL_ENV := $(abspath $(VENV))
# `cargo test` embeds the interpreter: it must find libpython and build against the venv's Python.
PY_LIBDIR = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')

.PHONY: demo test bench wheel dev venv cargo-test pytest stubtest clean test-pythons

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "maturin>=1.9,<2"
	touch $@

venv: $(VENV)/.deps

# Debug (dev-profile) build of the extension, installed editable into .venv.
dev: venv
	$(VENV)/bin/maturin develop --quiet --profile dev --extras test,bench,postgres

demo: dev
	$(PY) -m dshkit demo

cargo-test: venv
	CARGO_TARGET_DIR=target/cargo-test PYO3_PYTHON=$(abspath $(PY)) \
	    LD_LIBRARY_PATH=$(PY_LIBDIR) cargo test --quiet --lib

stubtest: dev
	$(PY) -m mypy.stubtest dshkit._core --allowlist tests/stubtest-allowlist.txt

pytest: dev
	$(PY) -m pytest

test: cargo-test wheel stubtest pytest

wheel: venv
	rm -rf dist
	$(VENV)/bin/maturin build --quiet --release --out dist
	$(VENV)/bin/maturin sdist --out dist

bench: venv
	$(VENV)/bin/maturin develop --quiet --release --extras test,bench,postgres
	$(PY) -m pytest benches --benchmark-only --benchmark-json=bench-results/latest.json -q -p no:cacheprovider -o testpaths=benches
	$(PY) benches/report.py bench-results/latest.json

clean:
	rm -rf target dist $(VENV) bench-results

# The suite on other interpreters (the minimum supported 3.10, and 3.13), when the machine has
# them (on PATH, or installed by pyenv): a dev wheel per interpreter, installed with the test
# extras into .venv-<python>.
OTHER_PYTHONS ?= python3.10 python3.13
test-pythons: venv
	@for python in $(OTHER_PYTHONS); do \
	    exe=$$($$python -c 'import sys; print(sys.executable)' 2>/dev/null || \
	        ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/*/bin/$$python 2>/dev/null | tail -n 1); \
	    if [ -z "$$exe" ]; then echo "== $$python: not installed, skipped"; continue; fi; \
	    echo "== $$python ($$exe)"; \
	    rm -rf target/wheels-$$python && \
	    $(VENV)/bin/maturin build --quiet --profile dev -i $$exe --out target/wheels-$$python && \
	    $$exe -m venv --clear .venv-$$python && \
	    wheel=$$(ls target/wheels-$$python/*.whl) && \
	    .venv-$$python/bin/python -m pip install --quiet "$$wheel[test]" && \
	    .venv-$$python/bin/python -m pytest -q -p no:cacheprovider --ignore=tests/packaging || exit 1; \
	done
