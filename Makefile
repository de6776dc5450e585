# The README's two commands, and what CI runs.
#   make demo       install what is missing, build (release) and run the main example
#   make test       install what is missing, build and run the whole test suite
#   make test-asan  the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-tsan  the concurrency tests under ThreadSanitizer
#   make bench      build the benchmarks (release) and run them, then measure compile time
# Each target installs missing Debian packages with apt-get (through sudo when not root).

SHELL := /bin/bash
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
PACKAGES := cmake make g++ git librange-v3-dev libfmt-dev libspdlog-dev catch2 libasio-dev libarchive-dev libsimdjson-dev libcurl4-openssl-dev zlib1g-dev liburing-dev pkg-config libpugixml-dev libssl-dev libdlpack-dev
# bench: GNU time, for the compile-time script's peak memory. The tests run the distributed
# example under mpirun too (Open MPI's launcher; dpipe links no MPI library).
bench: EXTRA_PACKAGES := time
test test-asan: EXTRA_PACKAGES := openmpi-bin
CMAKE_COMMON := -DDPIPE_WERROR=ON
# The test builds: -O1 with line tables compiles in half the time of RelWithDebInfo's -O2 -g,
# and line tables are all a sanitizer report or a backtrace needs.
TEST_BUILD := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" $(CMAKE_COMMON)

# The S3 tests and B8 run a real S3-compatible server (s3rver) from npm with Node.js:
# tests/s3/node_modules, installed from tests/s3/package-lock.json.
S3_SERVER := tests/s3/node_modules/.package-lock.json

# libtorch (Debian's libtorch-dev) is optional: where it is installed, the build adds dpipe::torch
# (the c10d store adapter), its tests and examples/libtorch_trainer.cpp; CI installs it first.
TORCH_PACKAGES := libtorch-dev

.PHONY: deps deps-torch demo test test-asan test-tsan bench clean

deps:
	@missing=""; \
	for package in $(PACKAGES) $(EXTRA_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "dpipe: installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

deps-torch:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(TORCH_PACKAGES)"

# Node.js and npm: Debian's packages where the machine has neither (a nodejs from elsewhere
# brings its own npm).
$(S3_SERVER): tests/s3/package-lock.json tests/s3/package.json
	@command -v node >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs
	@command -v npm >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
	npm ci --prefix tests/s3 --no-audit --no-fund --loglevel=error
	@touch $@

demo: deps
	cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDPIPE_BUILD_TESTS=OFF -DDPIPE_BUILD_EXAMPLES=ON $(CMAKE_COMMON)
	cmake --build build/release -j$(JOBS) --target dpipe_demo
	./build/release/examples/dpipe_demo

test: deps $(S3_SERVER)
	cmake -S . -B build/test $(TEST_BUILD)
	cmake --build build/test -j$(JOBS)
	ctest --test-dir build/test --output-on-failure -j$(JOBS)
	@dpkg-query -W -f='$${Status}' libtorch-dev 2>/dev/null | grep -q "ok installed" || \
	  echo "dpipe: skipped examples/libtorch_trainer.cpp and the C10dStore tests: libtorch is not installed (make deps-torch installs Debian's libtorch-dev)"

test-asan: deps $(S3_SERVER)
	cmake -S . -B build/asan -DDPIPE_SANITIZE=address,undefined $(TEST_BUILD)
	cmake --build build/asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build/asan --output-on-failure -j$(JOBS)

test-tsan: deps $(S3_SERVER)
	cmake -S . -B build/tsan -DDPIPE_SANITIZE=thread -DDPIPE_BUILD_EXAMPLES=OFF $(TEST_BUILD)
	cmake --build build/tsan -j$(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp ctest --test-dir build/tsan --output-on-failure -j$(JOBS)

bench: deps $(S3_SERVER)
	cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DDPIPE_BUILD_TESTS=OFF -DDPIPE_BUILD_EXAMPLES=OFF \
	  -DDPIPE_BUILD_BENCHMARKS=ON $(CMAKE_COMMON)
	cmake --build build/bench -j$(JOBS)
	for benchmark in build/bench/benchmarks/dpipe_bench_*; do "$$benchmark" || exit 1; done
	benchmarks/compile_time.sh

clean:
	rm -rf build
