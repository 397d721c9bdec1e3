# The two commands a fresh machine needs are `make demo` and `make test`;
# both install what is missing first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
# Seconds each libFuzzer target runs in `make fuzz` (nine targets).
FUZZ_SECONDS ?= 10
JOBS       ?= $(shell nproc)
IDEM       := $(BUILD)/idem

# Three lists, so that each command installs what it needs and no more:
# building and running idem (what `make demo`, `make build` and `make
# install` need, the demo's jq, python3 and column included); the test lab
# (servers, a browser, shells, linters) that `make test` and CI add; and
# what only `make bench` runs.
BUILD_PACKAGES := cmake g++ make pkg-config python3 jq bsdextrautils tzdata \
  libcli11-dev libsqlite3-dev libssl-dev nlohmann-json3-dev libfmt-dev \
  doctest-dev libsimdjson-dev libcurl4-openssl-dev \
  libhiredis-dev libxxhash-dev libcctz-dev libyaml-cpp-dev libutf8proc-dev \
  zlib1g-dev libzstd-dev liblzma-dev libbz2-dev libsodium-dev
TEST_PACKAGES := redis-server redis-tools openssl clang-format clang-tidy clang libclang-rt-14-dev \
  time chromium sqlite3 \
  python3-redis python3-prometheus-client python3-yaml dpkg-dev groff-base man-db zsh fish \
  zstd xz-utils bzip2
BENCH_PACKAGES := wrk

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

PREFIX     ?= /usr/local

# Line tables (-g1) instead of full debugging information: backtraces,
# perf and the sanitizers' reports keep every file and line, only gdb loses
# local variables. Measured per file (merge/run.cpp, reconcile/run.cpp,
# cli/keys.cpp, two rounds): the release build's compiles 28-40% shorter,
# the sanitizer build's ~10%. DEBUG_INFO=-g for a debugging session.
DEBUG_INFO ?= -g1

.PHONY: all deps test-deps bench-deps build test demo bench asan tsan fuzz tidy format format-check clean install uninstall package

all: build

# Installs only the packages of $(1) that are missing, so it is a no-op on a
# ready machine.
define install_missing
	@missing=$$(for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make $@: installing$$(echo $$missing | sed 's/^/ /')"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(BUILD_PACKAGES))

test-deps: deps
	$(call install_missing,$(TEST_PACKAGES))

bench-deps: test-deps
	$(call install_missing,$(BENCH_PACKAGES))

# A configure that fails (a package missing) leaves no cache behind: one
# left would read as configured, and every later make would fail on the
# Makefile it never wrote.
$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 $(DEBUG_INFO) -DNDEBUG" || \
	  { rm -f $(BUILD)/CMakeCache.txt; exit 1; }

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The binary, man pages, completions and docs under PREFIX (docs/install.md).
install: deps build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Removes what the last install wrote (its manifest lists every file).
uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "make uninstall: nothing was installed from $(BUILD)"; exit 1; }
	xargs -d '\n' rm -f < $(BUILD)/install_manifest.txt
	rm -f $(BUILD)/install_manifest.txt

# idem_VERSION_ARCH.deb in $(BUILD).
package: test-deps build
	cd $(BUILD) && cpack -G DEB

demo: deps build
	./samples/demo.sh $(IDEM)

bench: bench-deps build
	cmake --build $(BUILD) --target parse_floor
	./bench/run.sh $(IDEM)
	./bench/run_dedup.sh $(IDEM)
	./bench/run_reorder.sh $(IDEM)
	./bench/run_merge.sh $(IDEM)
	./bench/run_merge_memory.sh $(IDEM)
	./bench/run_states.sh $(IDEM)
	./bench/run_reconcile.sh $(IDEM)
	./bench/run_audit.sh $(IDEM)
	./bench/run_listen_replay.sh $(IDEM)
	./bench/run_redis_cluster.sh $(IDEM)
	./bench/run_compressed.sh $(IDEM)

# -O1, as the sanitizers' authors advise: every report keeps its file and
# line, and the suites run 1.8x as fast as at -O0 (e2e_audit: 53-54 s
# against 94-103 s, two runs each in turn, 2 cores); the whole ASan ctest
# took 774 s. A Debug build keeps the library's assertions
# (_GLIBCXX_ASSERTIONS).
asan: test-deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DIDEM_SANITIZE=ON \
	  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 $(DEBUG_INFO)"
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	# e2e_install checks packaging (man pages, completions, the .deb), and
	# e2e_failover_paths the other commands' claims through a failover (they
	# run the code e2e_stores and e2e_failover already run under the
	# sanitizer, and mostly wait for Redis to fail over); `make test` runs
	# both, and under the sanitizer they only cost CI time.
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -E '^e2e_(install|failover_paths)$$'

# ThreadSanitizer over what runs threads: the unit tests (workers, the
# block pipeline, the store's log thread) and the suites whose commands
# judge on worker threads or serve on handler threads. -O1 and only the
# binary and the unit tests keep its build short.
TSAN_SUITES := ^(unit|e2e_(dedup|listen|merge|reorder|states))$$
tsan: test-deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIDEM_TSAN=ON \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 $(DEBUG_INFO)"
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target idem idem_unit_tests
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -j $(JOBS) -R '$(TSAN_SUITES)'

# Coverage-guided fuzzing of every parser of untrusted input (fuzz/): clang's
# libFuzzer over the library built with AddressSanitizer and UBSan, each
# target FUZZ_SECONDS from its seed corpus under fuzz/run.sh's memory
# limits. Only the library and the targets are built.
fuzz: test-deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIDEM_LIBFUZZER=ON \
	  -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 $(DEBUG_INFO)"
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	./fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# clang-tidy with the checked-in .clang-tidy (every finding an error) over
# the library and the command line (their unity batches) and the tools, on the
# release build's compile database.
tidy: test-deps build
	run-clang-tidy -quiet -j $(JOBS) -p $(BUILD) '/(lib|cli|tools)/' 'idem_(core|cli)\.dir/Unity/' > $(BUILD)/tidy.log 2>&1 || \
	  { grep -E -A3 'error:' $(BUILD)/tidy.log | head -100; echo "make tidy: findings above (all in $(BUILD)/tidy.log)"; exit 1; }

format:
	$(call install_missing,clang-format)
	clang-format -i $$(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp')

format-check:
	$(call install_missing,clang-format)
	clang-format --dry-run --Werror $$(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
