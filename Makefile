# dshkit developer commands. Every target works on a fresh clone: it creates .venv itself.
#   make demo   run the offline demonstration (python -m dshkit demo; the runtime and the mcp extra only)
#   make test   cargo test, the release wheel, stubtest and the pytest suite
#   make bench  release build + pytest-benchmark suites, then the ratio table
#   make wheel  release wheel (this interpreter) and sdist into dist/
#   make wheels manylinux2014 release wheels for every CPython 3.10-3.13 the machine has, and sdist

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export VIRTUAL_ENV := $(abspath $(VENV))
# `cargo test` embeds the interpreter: it must find libpython and build against the venv's Python.
PY_LIBDIR = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')

.PHONY: demo test bench wheel wheels dev venv cargo-test pytest stubtest clean test-pythons

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "maturin>=1.9,<2"
	touch $@

venv: $(VENV)/.deps

# Debug (dev-profile) build of the extension, installed editable into .venv, with every extra the
# tests use. Cargo's progress is shown: the first build compiles for about a minute.
dev: venv
	$(VENV)/bin/maturin develop --profile dev --extras test,bench,postgres

# The demo needs the runtime and the one extra it shows (mcp), not the test and bench extras; a
# later `make test` runs `dev`, which adds them to the same .venv.
demo: venv
	$(VENV)/bin/maturin develop --profile dev --extras mcp
	$(PY) -m dshkit demo

cargo-test: venv
	CARGO_TARGET_DIR=target/cargo-test PYO3_PYTHON=$(abspath $(PY)) \
	    LD_LIBRARY_PATH=$(PY_LIBDIR) cargo test --quiet --lib

stubtest: dev
	$(PY) -m mypy.stubtest dshkit._core --allowlist tests/stubtest-allowlist.txt

pytest: dev
	$(PY) -m pytest

test: cargo-test wheels stubtest pytest

# Wheels are built with zig as the linker against glibc 2.17 (manylinux2014), so they install on
# the servers people have (RHEL/Alma 8, Debian 11, Ubuntu 20.04, Amazon Linux 2), and stripped.
WHEEL_FLAGS := --quiet --release --strip --zig --compatibility manylinux2014
# maturin finds zig through `python3 -m ziglang`: the venv's python3 has it.
WHEEL_BUILD := PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin build $(WHEEL_FLAGS)
# An interpreter's path: the one on PATH if it runs (pyenv shims may not), else the newest pyenv
# install of that version; nothing when the machine lacks it.
find_python = $(shell $(1) -c 'import sys; print(sys.executable)' 2>/dev/null || \
    ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/*/bin/$(1) 2>/dev/null | sort -V | tail -n 1)
WHEEL_PYTHONS ?= python3.10 python3.11 python3.12 python3.13
WHEEL_INTERPRETERS = $(foreach p,$(WHEEL_PYTHONS),$(call find_python,$(p)))

$(VENV)/.wheel-tools: $(VENV)/.deps
	$(PIP) install --quiet ziglang auditwheel
	touch $@

wheel: $(VENV)/.wheel-tools
	rm -rf dist
	$(WHEEL_BUILD) -i $(abspath $(PY)) --out dist
	$(VENV)/bin/maturin sdist --out dist

wheels: $(VENV)/.wheel-tools
	rm -rf dist
	$(WHEEL_BUILD) $(foreach i,$(WHEEL_INTERPRETERS),-i $(i)) --out dist
	$(VENV)/bin/maturin sdist --out dist

bench: venv
	$(VENV)/bin/maturin develop --release --extras test,bench,postgres
	$(PY) -m pytest benches --benchmark-only --benchmark-json=bench-results/latest.json -q -p no:cacheprovider -o testpaths=benches
	$(PY) benches/report.py bench-results/latest.json

clean:
	rm -rf target dist $(VENV) bench-results

# The suite on other interpreters (the minimum supported 3.10, and 3.13), when the machine has
# them: each installs its own release wheel from dist/ (`make wheels`, which `make test` runs
# first) with the test extras into .venv-<python>.
OTHER_PYTHONS ?= python3.10 python3.13
test-pythons: venv
	@for python in $(OTHER_PYTHONS); do \
	    exe=$$($$python -c 'import sys; print(sys.executable)' 2>/dev/null || \
	        ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/*/bin/$$python 2>/dev/null | sort -V | tail -n 1); \
	    if [ -z "$$exe" ]; then echo "== $$python: not installed, skipped"; continue; fi; \
	    tag=cp$$($$exe -c 'import sys; print("%d%d" % sys.version_info[:2])'); \
	    wheel=$$(ls dist/dshkit-*-$$tag-$$tag-*.whl 2>/dev/null | head -n 1); \
	    if [ -z "$$wheel" ]; then echo "== $$python: no $$tag wheel in dist/ (run make wheels)"; exit 1; fi; \
	    echo "== $$python ($$exe, $$wheel)"; \
	    $$exe -m venv --clear .venv-$$python && \
	    .venv-$$python/bin/python -m pip install --quiet "$$wheel[test]" && \
	    .venv-$$python/bin/python -m pytest -q -p no:cacheprovider --ignore=tests/packaging || exit 1; \
	done
