# Both entry points bootstrap .venv from a clean checkout; nothing else needs to be installed by hand.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: test codec demo lint bench conformance kafka-python-suite clean

# two distributions from this checkout: the client (setup.cfg) and the reference cluster (packaging/...)
REFERENCE_DIST := packaging/kafka-python-kip-reference

$(VENV): setup.cfg pyproject.toml setup.py $(REFERENCE_DIST)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e $(REFERENCE_DIST) -e '.[test,spark,bench]'
	touch $(VENV)

# The compiled record codec: `pip install -e` built it; rebuilt in place when its source changed since.
codec: $(VENV)
	$(PY) setup.py -q build_ext --inplace

test: $(VENV) codec
	@command -v java >/dev/null 2>&1 || echo "make test: no 'java' on PATH - the PySpark tests will be skipped." \
		"Install Java 17 to run them (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)."
	$(PY) -m ruff check kafka_kip kafka_kip_reference tests integration benchmarks
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(VENV)
	$(VENV)/bin/kafka-kip demo

lint: $(VENV)
	$(PY) -m ruff check kafka_kip kafka_kip_reference tests integration benchmarks

bench: $(VENV) codec
	$(PY) -m benchmarks.bench_cluster

conformance: $(VENV)
	$(PY) -m integration.report --output docs/CONFORMANCE.md

# kafka-python's own integration suite against Apache Kafka: KAFKA_PYTHON_SRC is a dpkp/kafka-python checkout.
# broker:clients pairs; e.g. KAFKA_PYTHON_SUITE_RUNS=reference:kafka-python for one run
KAFKA_PYTHON_SUITE_RUNS ?= reference:kafka-python reference:kafka_kip apache-kafka:kafka-python apache-kafka:kafka_kip

kafka-python-suite: $(VENV)
	@test -n "$(KAFKA_PYTHON_SRC)" || { echo "set KAFKA_PYTHON_SRC to a kafka-python source tree"; exit 2; }
	@status=0; for run in $(KAFKA_PYTHON_SUITE_RUNS); do \
		echo "== kafka-python's suite on $${run%%:*} with $${run##*:}'s clients"; \
		$(PY) -m integration.kafka_python_suite $(KAFKA_PYTHON_SRC) --broker $${run%%:*} --clients $${run##*:} \
			|| status=1; \
	done; exit $$status

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache kafka_kip/_codec/*.c kafka_kip/_codec/*.so
