# kvtier: the two set-up commands are `make run` and `make test`.
# Both install missing Debian packages first (scripts/install-deps).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ARGS ?=

.PHONY: all deps configure build run test bench test-asan test-tsan fuzz lint-python format format-check clean

all: build

deps:
	@bash scripts/install-deps

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Starts kvtierd in the foreground on its embedded defaults; Ctrl-C stops it.
# Builds only what it runs and what talks to it: the daemon, the CLI and the
# Python client (no tests, no benchmarks).
run: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target kvtierd kvtier kvtier_python
	./$(BUILD_DIR)/kvtierd $(ARGS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# Builds the benchmarks only (the `benchmarks` target), then runs each.
bench: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target benchmarks
	@bash scripts/install-deps fio
	./$(BUILD_DIR)/bench/host_put_get
	./$(BUILD_DIR)/bench/nvme_store --dir $(BUILD_DIR)/nvme-bench
	./$(BUILD_DIR)/bench/lookup_plan
	./$(BUILD_DIR)/bench/hybrid_groups
	./$(BUILD_DIR)/bench/prefix_lookup
	./$(BUILD_DIR)/bench/trace_replay --nvme-dir $(BUILD_DIR)
	./$(BUILD_DIR)/bench/scale --dir $(BUILD_DIR)/scale-bench
	@echo "scale again, with the heap in huge pages as the Docker image runs kvtierd:"
	GLIBC_TUNABLES=glibc.malloc.hugetlb=1 ./$(BUILD_DIR)/bench/scale --dir $(BUILD_DIR)/scale-bench
	./$(BUILD_DIR)/bench/lookup_rpc
	./$(BUILD_DIR)/bench/secure_rpc
	./$(BUILD_DIR)/bench/shm_save_load
	./$(BUILD_DIR)/bench/gather_scatter
	@if [ -x ./$(BUILD_DIR)/bench/gpu_copy ]; then ./$(BUILD_DIR)/bench/gpu_copy; fi
	bash bench/put_get_vs_redis.sh $(BUILD_DIR)
	bash bench/peer_transfer_vs_ucx_perftest.sh $(BUILD_DIR)
	bash bench/cluster_replay_vs_ucx_perftest.sh $(BUILD_DIR)

# Sanitizer builds compile at -O1 with line tables only: enough for
# symbolized reports, and about half the build time of -O2 -g.
# They link with lld, several times faster than GNU ld on these binaries.
SANITIZER_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  -DKVTIER_WITH_CUDA=OFF -DKVTIER_BUILD_BENCH=OFF \
  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld

# The unit and integration tests under AddressSanitizer + UndefinedBehaviorSanitizer
# (the `slow` crash-oracle and soak runs are left to `make test`). Built with
# clang, which also builds the libFuzzer targets from the same objects
# (`make fuzz` runs them).
test-asan: deps
	CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja $(SANITIZER_FLAGS) \
	  -DKVTIER_SANITIZE=address,undefined -DKVTIER_BUILD_FUZZ=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE slow

# The libFuzzer targets for FUZZ_SECONDS each (after `make test-asan`).
FUZZ_SECONDS ?= 60
fuzz:
	bash tests/fuzz/run_fuzzers.sh $(FUZZ_SECONDS) build-fuzz build-asan

# The unit and integration tests under ThreadSanitizer (clang). kvtier's locks
# are its own (base/mutex.h, over std::mutex), so TSan sees them; what stays
# suppressed, in uninstrumented third-party libraries, is listed with the
# reason in tests/tsan.supp.
test-tsan: deps
	CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja $(SANITIZER_FLAGS) \
	  -DKVTIER_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -LE slow --timeout 300

# The Python client and the Python tests (Debian's pyflakes).
PYTHON_SOURCES = $(shell git ls-files '*.py')
lint-python:
	pyflakes3 $(PYTHON_SOURCES)

SOURCES = $(shell git ls-files '*.cc' '*.h')

format:
	clang-format -i $(SOURCES)

format-check:
	clang-format --dry-run --Werror $(SOURCES)

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan build-fuzz
