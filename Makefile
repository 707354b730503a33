# rocketpy developer and operator entry points. Every target installs what it needs into ./.venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST := $(PY) -m pytest
# Fast suite: unit, golden, integration, process and interop tests; chaos, spark and slow suites
# have their own targets.
FAST_MARKERS := not chaos and not spark and not slow
# make test's parallel workers (pytest-xdist; a file's tests stay on one worker, so module-scoped
# daemons start once). TEST_WORKERS=0 runs in this process, as the other test targets do.
TEST_WORKERS ?= 3
# Source trees that exist in this checkout (analytics/ arrives with the PySpark job).
SRC := $(wildcard rocketpy tests analytics)

.PHONY: install fmt lint type imports check proto test test-unit test-int test-process test-chaos test-spark \
        test-interop test-uvloop cluster cluster-stop cluster-kill-master cluster-classic cluster-classic-stop bench-ha-classic bench bench-features bench-proxy bench-send bench-send-instr bench-namesrv bench-store bench-recovery bench-controller bench-ha bench-dledger-mode analyze bench-analytics clean
.PHONY: fuzz

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,analytics]'
	@touch $(STAMP)

install: $(STAMP)

fmt: $(STAMP)
	$(PY) -m ruff format $(SRC)
	$(PY) -m ruff check --fix $(SRC)

lint: $(STAMP)
	$(PY) -m ruff format --check $(SRC)
	$(PY) -m ruff check $(SRC)

type: $(STAMP)
	$(PY) -m mypy

imports: $(STAMP)
	$(VENV)/bin/lint-imports

check: lint type imports test

# Regenerate rocketpy/proxy/pb/*_pb2*.py(i) from the .proto files there (grpcio-tools, pinned);
# tests/unit/proxy/test_proto_regen.py fails until the result is committed.
proto: $(STAMP)
	$(PY) -m rocketpy.tools.gen_proto

# The real C++-based RocketMQ client for tests/interop (skipped with the reason if it cannot install).
INTEROP := $(VENV)/.interop
$(INTEROP): $(STAMP)
	$(PY) tests/interop/install_cpp_client.py && touch $(INTEROP) || \
		echo "interop client not installed: tests/interop will be skipped"

# The real 5.x gRPC client (rocketmq-python-client) for the proxy's interop tests, in a venv of its
# own: its generated apache.rocketmq.v2 modules clash with rocketpy.proxy.pb in one process.
INTEROP5_VENV ?= .venv-interop5
INTEROP5 := $(INTEROP5_VENV)/.installed
$(INTEROP5): $(STAMP)
	$(PY) tests/interop/install_grpc_client.py $(INTEROP5_VENV) && touch $(INTEROP5) || \
		echo "gRPC client not installed (PyPI unreachable?): its interop tests will be skipped"

test: $(STAMP) $(INTEROP) $(INTEROP5)
	$(PYTEST) -m "$(FAST_MARKERS)" -n $(TEST_WORKERS) --dist loadfile

test-unit: $(STAMP)
	$(PYTEST) tests/unit tests/golden

test-int: $(STAMP)
	$(PYTEST) tests/integration

test-process: $(STAMP)
	$(PYTEST) tests/process

test-uvloop: $(STAMP)
	ROCKETPY_TEST_UVLOOP=1 $(PYTEST) -m "$(FAST_MARKERS)"

test-chaos: $(STAMP)
	$(PYTEST) -m chaos --timeout=3600

# make fuzz: the hostile-frame campaign (issue 25): FUZZ_FRAMES (default 1,000,000) frames split
# across the NameServer, a broker, a controller and an HA port; FUZZ_SEED replays a run.
fuzz: $(STAMP)
	nice -n 10 $(PYTEST) -m chaos tests/chaos/test_fuzz_campaign.py -s --timeout=3600

test-spark: $(STAMP)
	$(PYTEST) -m spark --timeout=1800

# make analyze DUMPS="dir-or-glob ..." [OUT=report] [MASTER=spark://...]: the PySpark throughput
# report (Parquet, CSV, markdown, PNG plots) from brokers' metrics dumps.
DUMPS ?= .cluster/data/*/store/metrics
OUT ?= .analytics-report
analyze: $(STAMP)
	$(PY) -m analytics.throughput --input $(DUMPS) --output $(OUT) $(if $(MASTER),--master $(MASTER))

# make bench-analytics: >= 5 M generated dump records through the job on local[*], records/s,
# beside a plain-Python single pass over the same files.
bench-analytics: $(STAMP)
	$(PY) -m analytics.bench $(BENCH_ARGS)

test-interop: $(STAMP) $(INTEROP) $(INTEROP5)
	$(PYTEST) -m interop --timeout=600

CLUSTER_DIR ?= $(CURDIR)/.cluster
# PROXY=local (default): every broker serves gRPC too (--enable-proxy); PROXY=cluster: one
# mqproxy; PROXY= (empty): no proxy. The summary prints the gRPC endpoints.
PROXY ?= local
# MODE=dledger: a NameServer and one DLedger CommitLog group of three brokers (conf/dledger/).
MODE ?= controller
cluster: $(STAMP)
ifeq ($(MODE),dledger)
	$(PY) -m rocketpy.tools.cluster_dledger start --dir "$(CLUSTER_DIR)"
else
	$(PY) -m rocketpy.tools.cluster start --dir "$(CLUSTER_DIR)" $(if $(EMBEDDED),--embedded) $(if $(PROXY),--proxy $(PROXY))
endif

cluster-kill-master: $(STAMP)
ifeq ($(MODE),dledger)
	$(PY) -m rocketpy.tools.cluster_dledger kill-master --dir "$(CLUSTER_DIR)"
else
	$(PY) -m rocketpy.tools.cluster kill-master --dir "$(CLUSTER_DIR)"
endif

cluster-stop: $(STAMP)
	$(PY) -m rocketpy.tools.cluster stop --dir "$(CLUSTER_DIR)"

# Classic master/slave (no controller): LAYOUT=2m-noslave|2m-2s-async|2m-2s-sync from conf/<layout>/.
CLUSTER_CLASSIC_DIR ?= $(CURDIR)/.cluster-classic
LAYOUT ?= 2m-2s-async
BASE_PORT ?= 9876
cluster-classic: $(STAMP)
	$(PY) -m rocketpy.tools.cluster_classic start --layout $(LAYOUT) --dir "$(CLUSTER_CLASSIC_DIR)" --base-port $(BASE_PORT)

cluster-classic-stop: $(STAMP)
	$(PY) -m rocketpy.tools.cluster_classic stop --dir "$(CLUSTER_CLASSIC_DIR)"

bench-namesrv: $(STAMP)
	$(PY) -m rocketpy.tools.bench_namesrv $(BENCH_ARGS)

# make bench: NameServer + broker + echo server on loopback; every phase beside the ceiling.
# BENCH_ARGS="-d 30 --soak 600" runs longer phases and a 10-minute RSS soak.
bench: $(STAMP)
	$(PY) -m rocketpy.tools.bench_suite $(BENCH_ARGS)

# make bench-features: POP vs push pull, half + commit vs plain sends, 100k pending timers (rate,
# RSS, lateness) and all 18 delay levels busy (scaled-down levels); ratios to the same run's
# plain phases. BENCH_ARGS="--quick" is a smoke run; "--timers 0 --per-level 0" skips phases.
bench-features: $(STAMP)
	$(PY) -m rocketpy.tools.bench_features $(BENCH_ARGS)

# make bench-proxy: namesrv + broker --enable-proxy (Local) + mqproxy (Cluster) + a do-nothing
# grpc.aio server on loopback; send and receive+ack msg/s through both proxies beside the same
# broker's remoting figures and the grpc.aio floor from the same run, ratios and CPU us/msg.
bench-proxy: $(STAMP)
	$(PY) -m rocketpy.tools.bench_proxy $(BENCH_ARGS)

# make bench-send [REF=path/to/mini_broker.py]: single and batch sends kept 64 deep on one
# connection, then 1 in flight; broker CPU/msg from /proc; with REF, that reference hot path runs
# before and after and every figure is printed as a ratio to it (the reference is only executed).
bench-send: $(STAMP)
	$(PY) -m rocketpy.tools.bench_send $(if $(REF),--reference $(REF)) $(BENCH_ARGS)

# make bench-send-instr [REF=path/to/mini_broker.py]: the same sends, with the broker (and REF's
# server) under valgrind's callgrind: instructions per message, a figure the machine's speed
# drift does not move, for judging a send-path change (needs valgrind; a few minutes).
bench-send-instr: $(STAMP)
	$(PY) -m rocketpy.tools.bench_send_instr $(if $(REF),--reference $(REF)) $(BENCH_ARGS)

# make bench-store: appends/s and MB/s (ASYNC_FLUSH; SYNC_FLUSH group commit at 64 producers)
# beside a bare mmap copy loop and a bare write+fdatasync loop on the same disk. DIR= picks the disk.
bench-store: $(STAMP)
	$(PY) -m rocketpy.tools.bench_store --dir $(or $(DIR),.bench-store) $(BENCH_ARGS)

# make bench-controller: a 3-member Raft group on loopback (committed writes/s, propose p50/p99,
# in-process leader failover), then three mqcontroller processes: broker-master re-election after
# its heartbeats stop and controller-leader failover after SIGKILL.
# make bench-recovery: boot time, MB scanned, peak RSS after SIGTERM and SIGKILL at 0.5/2/5 GiB
# stored, beside a bare sequential read. DIR= picks the disk (needs the largest size + 2 GiB).
bench-recovery: $(STAMP)
	$(PY) -m rocketpy.tools.bench_recovery --dir $(or $(DIR),.bench-recovery) $(BENCH_ARGS)

bench-controller: $(STAMP)
	$(PY) -m rocketpy.tools.bench_dledger $(BENCH_ARGS)
	$(PY) -m rocketpy.tools.bench_controller

# One master vs a 3-replica all-ack broker set (msg/s, MB/s, p50/p99, ratio), then a SIGKILL of the
# master while producing (time to the first SEND_OK and to the new master in getSyncStateSet).
bench-ha: $(STAMP)
	$(PY) -m rocketpy.tools.bench_ha $(BENCH_ARGS)

# A DLedger CommitLog group, batch push off and on (3 runs each), beside one ASYNC master and a
# controller-mode 3-replica set: msg/s, p50/p99, broker CPU/msg, batch/single and DLedger/controller.
bench-dledger-mode: $(STAMP)
	$(PY) -m rocketpy.tools.bench_dledger_mode $(BENCH_ARGS)

# 2m-noslave vs 2m-2s-async vs 2m-2s-sync producer throughput in one run, with the ratios.
bench-ha-classic: $(STAMP)
	$(PY) -m rocketpy.tools.bench_ha_classic $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(INTEROP5_VENV) .cluster .cluster-classic .bench-store .bench-recovery .analytics-report .pytest_cache .mypy_cache .ruff_cache build *.egg-info
