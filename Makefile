# The two commands of the README, and a few more. Everything that these need
# and a fresh Debian 12 machine lacks is installed by scripts/install-deps.sh.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build demo check bench install clean deps

all: build

deps:
	@bash scripts/install-deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLPROF_BUILD_EXAMPLES=ON -DMLPROF_BUILD_BENCH=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Profiles the bundled CNN inference: prints its statistics and the trace's path.
demo: build
	@mkdir -p $(BUILD)/demo
	@cd $(BUILD)/demo && MLPROF_FILENAME=cnn_trace.json ../cnn_infer

# Every test: a normal build, then ASan+UBSan and TSan builds, and the viewer test.
check:
	@bash scripts/check.sh

# The recorder's costs (and the call-stack sampler's, against perf record), then mlprof analyze on a 512 MB trace against Python's json
# (BENCH_MB=64 for a quick run; it needs about 4 GB of memory for Python's side),
# and analyze and kernels on a directory of 8 ranks' traces twice that size (1 GB).
BENCH_MB ?= 512
bench: build
	@$(BUILD)/bench_core
	@$(BUILD)/bench_ring
	@$(BUILD)/bench_write && $(BUILD)/bench_write --args 0 --formats json
	@$(BUILD)/bench_stacks
	@python3 bench/bench_run.py $(BUILD)/mlprof
	@/usr/bin/python3 bench/bench_torch.py
	@/usr/bin/python3 bench/bench_op.py
	@python3 bench/bench_analyze.py $(BUILD)/mlprof --mb $(BENCH_MB)
	@python3 bench/bench_ranks.py $(BUILD)/mlprof --mb $$(( $(BENCH_MB) * 2 ))
	@python3 bench/bench_merge.py $(BUILD)/mlprof
	@python3 bench/bench_sqlite.py $(BUILD)/mlprof
	@python3 bench/bench_mpi.py $(BUILD)/mlprof

install: build
	@cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) build-asan build-tsan
