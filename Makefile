# fheplan — top-level build. `make` builds the library (static and shared) and the CLI;
# `make test` installs missing packages, builds and runs every test that needs no GPU.
# Pieces of the build owned by one part of the tree live in mk/*.mk.

CC         ?= cc
CUDA_HOME  ?= /usr/local/cuda
CUDA       ?= $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime.h),1,0)
# A build without CUDA lives apart so that objects never mix.
BUILD      ?= $(if $(filter 1,$(CUDA)),build,build/nocuda)
NVCC       ?= $(CUDA_HOME)/bin/nvcc
OPT        ?= -O2 -g
SAN        ?=
VERSION    := $(shell sed -n 's/^\#define FHEPLAN_VERSION "\(.*\)"/\1/p' include/fheplan/version.h)
SOVERSION  := $(firstword $(subst ., ,$(VERSION)))
PREFIX     ?= /usr/local
DESTDIR    ?=

GEN        := $(BUILD)/gen
# The project's own flags live in FHR_*; CPPFLAGS, CFLAGS, LDFLAGS and LDLIBS are the
# user's and come last (`make CFLAGS=-O0` still builds with -std=c11 -Werror -fPIC).
FHR_CPPFLAGS := -D_GNU_SOURCE -Iinclude -I. -I$(GEN)
FHR_CFLAGS   := -std=c11 -Wall -Wextra -Werror -fPIC -fvisibility=hidden
FHR_LDLIBS   := -lcjson -lpthread -lm

ifeq ($(CUDA),1)
FHR_CPPFLAGS += -DFHEPLAN_HAVE_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LIBS    := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt
NVCCFLAGS    ?= -O2 -std=c++17 -arch=sm_90 -Xcompiler -fPIC,-fvisibility=hidden -Iinclude -I.
FHR_LDLIBS   += $(CUDA_LIBS)
endif
ALL_CPPFLAGS  = $(FHR_CPPFLAGS) $(CPPFLAGS)
ALL_CFLAGS    = $(FHR_CFLAGS) $(OPT) $(SAN) $(CFLAGS)
ALL_LDFLAGS   = $(SAN) $(LDFLAGS)
ALL_LDLIBS    = $(FHR_LDLIBS) $(LDLIBS)

# Sources: every C file of a library folder; generated front-end files are added by mk/lang.mk.
LIB_SRCS   := $(wildcard base/*.c cuda/*.c runtime/*/*.c compiler/*.c)
LIB_CU     := $(if $(filter 1,$(CUDA)),$(wildcard cuda/*.cu))
GEN_SRCS   :=
GEN_HDRS   :=
CLI_SRCS   := $(wildcard cli/*.c)
UNIT_SRCS  := $(wildcard tests/unit/*.c)
TEST_LIBS  := -lcriterion

.DEFAULT_GOAL := all
# Each piece by name: a missing file stops the build instead of dropping its suite.
MK_FILES := mk/bench.mk mk/cheddar.mk mk/controller.mk mk/cuda.mk mk/fuzz.mk mk/guides.mk \
            mk/lang.mk mk/mpi.mk mk/oracle.mk mk/phantom.mk mk/python.mk mk/tools.mk mk/vm.mk
include $(MK_FILES)

LIB_OBJS   = $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS)) \
             $(patsubst $(GEN)/%.c,$(BUILD)/obj/gen/%.o,$(GEN_SRCS)) \
             $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(LIB_CU))
CLI_OBJS   = $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
UNIT_OBJS  = $(patsubst %.c,$(BUILD)/obj/%.o,$(UNIT_SRCS)) \
             $(BUILD)/obj/bench/schedule.o  # test_schedule.c: the bench's yardsticks

STATIC     = $(BUILD)/libfheplan.a
SHARED     = $(BUILD)/libfheplan.so.$(VERSION)
CLI        = $(BUILD)/fheplan
UNIT       = $(BUILD)/tests/unit

.PHONY: all lib test test-run sanitize tsan deps clean valgrind install uninstall test-install FORCE
FORCE: # a prerequisite that is always out of date (rules that must look every time)
all: lib $(CLI)
lib: $(STATIC) $(SHARED) $(BUILD)/libfheplan.so

$(BUILD)/obj/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/%.o: $(GEN)/%.c | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -Wno-unused-function -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(STATIC): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libfheplan.so.$(SOVERSION) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LDLIBS)

$(BUILD)/libfheplan.so: $(SHARED)
	ln -sf libfheplan.so.$(VERSION) $@
	ln -sf libfheplan.so.$(VERSION) $(BUILD)/libfheplan.so.$(SOVERSION)

$(CLI): $(CLI_OBJS) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJS) $(STATIC) $(ALL_LDLIBS)

$(UNIT): $(UNIT_OBJS) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(UNIT_OBJS) $(STATIC) $(TEST_LIBS) $(ALL_LDLIBS)

# ---- tests -----------------------------------------------------------------------------
# A test that runs the CLI runs the one of its own build (BUILD=build/asan, build/tsan, ...).
$(BUILD)/obj/tests/unit/%.o $(BUILD)/obj/tsan-tests/unit/%.o: FHR_CPPFLAGS += -DFHEPLAN_CLI='"$(BUILD)/fheplan"'

# `make test` is the one command the README and CI use: it installs what is missing,
# then builds and runs the suite. Extra suites register themselves in TEST_EXTRA.
test: deps
	@$(MAKE) --no-print-directory test-run

UNIT_ARGS ?= --jobs=2
TEST_EXTRA += test-layers test-install
# tests/tools/stages.sh builds, runs the unit suite and each TEST_EXTRA target in turn, and
# prints the seconds each stage took.
# The build stage uses every core unless make was given its own -j.
NPROC ?= $(shell nproc 2>/dev/null || echo 1)
TEST_BUILD_JOBS = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(NPROC))
test-run:
	@sh tests/tools/stages.sh "$(MAKE) --no-print-directory" \
	  "$(TEST_BUILD_JOBS) all $(UNIT) $(TEST_EXTRA_DEPS)" "$(UNIT) $(UNIT_ARGS)" $(TEST_EXTRA)

# The layering of README's Layout table, proved on the objects: every call and every
# internal include points down the layers, and no two files call each other in a circle.
.PHONY: test-layers
test-layers: $(LIB_OBJS) $(CLI_OBJS)
	@tests/tools/layers.sh $(BUILD)/obj $^
	@if [ -f "$(PY_INC)/Python.h" ]; then tests/tools/pylayers.sh '$(CC)' '$(PY_INC)'; \
	  else echo "layers: no Python.h for $(PYTHON): python/src not checked"; fi
	@for f in $(sort $(wildcard base/*.c cuda/*.c cuda/*.cu runtime/*/*.c compiler/*.c cli/*.c python/src/*.c)); do \
	  d=$${f%/*}; grep "^| [^|]* | [^|]*\`$$d/\`" README.md | grep -q "\`$${f##*/}\`" || \
	  { echo "layers: README's Layout table does not name $$f in its row for $$d/"; exit 1; }; done

# The build checking itself: flags given on the command line keep the project's, every
# file that starts threads runs under TSan, every mk/*.mk is included, and the code that
# only a GPU runs (tests/gpu, bench/) compiles whenever the CUDA toolkit is present.
.PHONY: test-build
TEST_EXTRA += test-build
BUILD_ONLY = $(BENCH_BOOT) $(BENCH_SEEDED) $(BENCH_STAGING) $(BENCH_POLICY) $(BENCH_REQUEST) $(BUILD)/bench/compile \
             $(if $(filter 1,$(CUDA)),$(GPU_TEST) $(BENCH_TRANSFER))
# every bench/*.c is some benchmark's (bench/compile is built straight from its source)
BENCH_LINKED = $(patsubst $(BUILD)/obj/%.o,%.c,$(BENCH_BOOT_OBJ) $(BENCH_SEEDED_OBJ) $(BENCH_STAGING_OBJ) \
               $(BENCH_POLICY_OBJ) $(BENCH_REQUEST_OBJ) $(BENCH_XFER_OBJ)) bench/compile.c
# The engine examples' C drivers need only the CUDA headers to compile (their engines link
# them elsewhere: mk/phantom.mk, mk/cheddar.mk).
ENGINE_EXAMPLES = examples/phantom/bsgs.c examples/cheddar/boot.c
test-build: $(BUILD_ONLY)
	@cmd=$$($(MAKE) --no-print-directory -n -B CFLAGS=-O0 CPPFLAGS=-DFHR_USER_FLAG \
	  $(BUILD)/obj/base/error.o | grep -e ' -c base/error.c'); \
	for f in -std=c11 -Werror -fPIC -Iinclude -O0 -DFHR_USER_FLAG; do \
	  case " $$cmd " in *" $$f "*) ;; *) echo "test-build: CFLAGS=-O0 CPPFLAGS=... lost $$f: $$cmd"; exit 1;; esac; \
	done
	@for f in $$(grep -l pthread_create $(UNIT_SRCS)); do case " $(TSAN_UNIT) " in \
	  *" $$f "*) ;; *) echo "test-build: $$f starts threads but is not in TSAN_UNIT"; exit 1;; esac; done
	@for f in mk/*.mk; do case " $(MK_FILES) " in \
	  *" $$f "*) ;; *) echo "test-build: $$f is not in MK_FILES (never included)"; exit 1;; esac; done
	@for f in bench/*.c; do case " $(BENCH_LINKED) " in \
	  *" $$f "*) ;; *) echo "test-build: $$f is linked into no benchmark (mk/*.mk)"; exit 1;; esac; done
	@$(if $(filter 1,$(CUDA)),for f in $(ENGINE_EXAMPLES); do \
	  $(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -fsyntax-only $$f || exit 1; done)
	@echo "test-build: flags kept, TSan list complete, mk files included, every bench/*.c linked; compiled $(notdir $(BUILD_ONLY))$(if $(filter 1,$(CUDA)), and the C drivers of the engine examples,, (no CUDA toolkit: tests/gpu, bench/transfer and the engine examples' drivers not compiled))"

# Deliberate breaks the suite must notice (tests/mutants/mutants.tsv): a copy of the tree
# (tests/mutants/copy-tree.sh, checked by test-copy.sh), built once, each break rebuilt and
# its suites run. make test runs a deterministic sample (every MUTANT_SAMPLE-th line and one
# per folder); make test-long runs every line. Not under SAN.
.PHONY: test-mutants test-mutants-all
MUTANT_SAMPLE ?= 6
TEST_EXTRA += $(if $(SAN),,bg:test-mutants)
# The copy builds with CUDA=0 and MPI=0 (a CUDA build's emulated device times some events
# differently, and one break goes unnoticed there); it is seeded from a CUDA=0 build.
MUTANT_ENV = MUTANT_SEED=$(if $(filter 0,$(CUDA)),$(if $(SAN),,$(BUILD)))
test-mutants:
	@sh tests/mutants/test-copy.sh
	MUTANT_SAMPLE=$(MUTANT_SAMPLE) $(MUTANT_ENV) sh tests/mutants/run.sh $(BUILD)/mutants
test-mutants-all:
	@sh tests/mutants/test-copy.sh
	MUTANT_SAMPLE=all $(MUTANT_ENV) sh tests/mutants/run.sh $(BUILD)/mutants

# The exhaustive sweeps that make test leaves out, for CI (.ci/run) and before a release:
# every mutant, each fuzz target for FUZZ_LONG_RUNS mutations, the oracle over
# ORACLE_LONG_SEEDS more seeds. Each stage timed as in make test.
.PHONY: test-long
FUZZ_LONG_RUNS    ?= 30000
ORACLE_LONG_SEEDS ?= 2 3 4
test-long: deps
	@sh tests/tools/stages.sh "$(MAKE) --no-print-directory" "$(TEST_BUILD_JOBS) all $(UNIT) $(ORACLE)" - \
	  test-mutants-all fuzz-long $(addprefix oracle-seed-,$(ORACLE_LONG_SEEDS))
.PHONY: fuzz-long
fuzz-long:
	@$(MAKE) --no-print-directory fuzz-check FUZZ_CHECK_RUNS=$(FUZZ_LONG_RUNS)
oracle-seed-%:
	@$(MAKE) --no-print-directory test-oracle ORACLE_FIXED_SEED=$*

# ASan+UBSan over the whole unit suite and the Python suite (CUDA off: no GPU code runs in CI
# anyway; the Python one preloads the compiler's ASan runtime: mk/python.mk).
sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build/asan CUDA=0 OPT='-O1 -g' \
	  SAN='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all' \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=malloc_context_size=2 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 test-run

# TSan over every test of the files that start threads, named here (test-build checks
# that no file that calls pthread_create is missing). Criterion's forking runner cannot
# start under TSan, so these files are built against a small in-process stand-in
# (tests/tsan/) and run in one process.
TSAN_UNIT := tests/unit/test_controller_threads.c tests/unit/test_emu.c tests/unit/test_fault.c \
             tests/unit/test_lease.c tests/unit/test_lock.c tests/unit/test_reentrancy.c \
             tests/unit/test_stress.c tests/unit/test_engine.c tests/unit/test_engine_threads.c \
             tests/unit/test_staging.c tests/unit/test_concurrency.c
TSAN_SRCS  = $(TSAN_UNIT) tests/tsan/main.c
$(BUILD)/tests/tsan: $(patsubst %.c,$(BUILD)/obj/tsan-%.o,$(TSAN_SRCS)) $(STATIC) | $(CLI)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LDLIBS)
$(BUILD)/obj/tsan-%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -Itests/tsan $(ALL_CPPFLAGS) $(ALL_CFLAGS) -Wno-unused-parameter -MMD -MP -c $< -o $@

tsan: deps
	@$(MAKE) --no-print-directory BUILD=build/tsan CUDA=0 OPT='-O1 -g' SAN=-fsanitize=thread \
	  build/tsan/tests/tsan
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build/tsan/tests/tsan

valgrind: deps
	@$(MAKE) --no-print-directory BUILD=build/vg CUDA=0 OPT='-O1 -g' build/vg/tests/unit \
	  build/vg/fheplan
	valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	  --trace-children=yes --quiet build/vg/tests/unit --jobs=1

# Installs what a fresh Debian 12 machine lacks (re2c, bison, cJSON, Criterion, pkg-config,
# mandoc and groff for the manual lint, man-db for `man NAME` of the installed pages,
# cmake for the CMake package's test, python3-dev, -numpy, -pytest, -hypothesis, -setuptools,
# -wheel, -venv and -pip and mypy for the Python binding, and Open MPI unless MPI=0; clang and its libFuzzer
# runtime for the fuzz targets; valgrind; Chromium for the timeline test only with
# CHROMIUM=1: it is some 350 MB installed, so without it that test skips and says so).
# Nothing happens when everything is present.
deps:
	@missing=""; \
	command -v re2c >/dev/null 2>&1 || missing="$$missing re2c"; \
	command -v bison >/dev/null 2>&1 || missing="$$missing bison"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v mandoc >/dev/null 2>&1 || missing="$$missing mandoc"; \
	command -v groff >/dev/null 2>&1 || missing="$$missing groff-base"; \
	$(if $(filter 1,$(CHROMIUM)),command -v chromium >/dev/null 2>&1 || missing="$$missing chromium";) \
	[ -f /usr/include/cjson/cJSON.h ] || missing="$$missing libcjson-dev"; \
	[ -f /usr/include/criterion/criterion.h ] || missing="$$missing libcriterion-dev"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing build-essential"; \
	command -v clang >/dev/null 2>&1 || missing="$$missing clang"; \
	ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || \
	  missing="$$missing libclang-rt-14-dev"; \
	command -v valgrind >/dev/null 2>&1 || missing="$$missing valgrind"; \
	command -v cmake >/dev/null 2>&1 || missing="$$missing cmake"; \
	command -v man >/dev/null 2>&1 || missing="$$missing man-db"; \
	ls /usr/include/python3*/Python.h >/dev/null 2>&1 || missing="$$missing python3-dev"; \
	/usr/bin/python3 -c 'import numpy' 2>/dev/null || missing="$$missing python3-numpy"; \
	/usr/bin/python3 -c 'import pytest' 2>/dev/null || missing="$$missing python3-pytest"; \
	/usr/bin/python3 -c 'import hypothesis' 2>/dev/null || missing="$$missing python3-hypothesis"; \
	command -v mypy >/dev/null 2>&1 || missing="$$missing mypy"; \
	/usr/bin/python3 -c 'import setuptools, wheel, ensurepip, pip' 2>/dev/null || \
	  missing="$$missing python3-setuptools python3-wheel python3-venv python3-pip"; \
	command -v zsh >/dev/null 2>&1 || missing="$$missing zsh"; \
	command -v fish >/dev/null 2>&1 || missing="$$missing fish"; \
	command -v python3 >/dev/null 2>&1 || missing="$$missing python3"; \
	$(if $(MPI_DEBS),command -v $(MPICC) >/dev/null 2>&1 || missing="$$missing $(MPI_DEBS)";) \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# ---- install ------------------------------------------------------------------------
# Honours PREFIX and DESTDIR. Installs headers, both libraries (versioned soname), the CLI,
# the manual pages (with a link per name of each page's NAME section), the pkg-config
# files (fheplan, fheplan-static), the CMake package and the bash, zsh and fish completions.
HEADERS   = $(wildcard include/fheplan/*.h)
MANPAGES  = $(wildcard man/*.[0-9])
LIBDIR    = $(PREFIX)/lib
PCDIR     = $(LIBDIR)/pkgconfig

$(BUILD)/fheplan.pc: Makefile FORCE # PREFIX may differ from the last build
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: fheplan' 'Description: residency manager and plan runtime for FHE values on CUDA' \
	  'Version: $(VERSION)' 'Libs: -L$${libdir} -lfheplan' \
	  'Libs.private: $(ALL_LDLIBS)' 'Requires.private: libcjson' \
	  'Cflags: -I$${includedir}' > $@

# The static archive alone, with its private libraries in Libs: `pkg-config --libs
# fheplan-static` links libfheplan.a whatever .so lies beside it (fheplan-explicit(7)).
$(BUILD)/fheplan-static.pc: Makefile FORCE
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: fheplan-static' 'Description: fheplan linked statically (libfheplan.a)' \
	  'Version: $(VERSION)' 'Libs: $${libdir}/libfheplan.a $(ALL_LDLIBS)' \
	  'Cflags: -I$${includedir}' > $@

# The CMake package (find_package(fheplan)): cmake/*.in with the version and the static
# archive's private libraries filled in; the files find the prefix from where they lie.
CMAKEDIR  = $(LIBDIR)/cmake/fheplan
CMAKE_LIBS = $(patsubst -l%,%,$(filter -l%,$(ALL_LDLIBS)))
CMAKE_LIBDIRS = $(patsubst -L%,%,$(filter -L%,$(ALL_LDLIBS)))
$(BUILD)/cmake/fheplanConfig.cmake $(BUILD)/cmake/fheplanConfigVersion.cmake: \
  $(BUILD)/cmake/%.cmake: cmake/%.cmake.in Makefile include/fheplan/version.h
	@mkdir -p $(dir $@)
	sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOVERSION@|$(SOVERSION)|g' \
	  -e 's|@STATIC_LIBS@|$(CMAKE_LIBS)|g' -e 's|@STATIC_LIBDIRS@|$(CMAKE_LIBDIRS)|g' $< > $@

CMAKE_FILES = $(BUILD)/cmake/fheplanConfig.cmake $(BUILD)/cmake/fheplanConfigVersion.cmake
# Every name in a page's NAME section other than the page's own gets a link to it
# (fhr_move.3 -> fhr_manager.3), so that `man fhr_move` finds the page.
MAN_LINKS = sed -n '/^\.Sh NAME/,/^\.Sh [A-MO-Z]/s/^\.Nm \([A-Za-z0-9_.-]*\).*/\1/p'
install: all $(BUILD)/fheplan.pc $(BUILD)/fheplan-static.pc $(CMAKE_FILES)
	install -d $(DESTDIR)$(PREFIX)/include/fheplan $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PCDIR) \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(CMAKEDIR)
	for h in $(HEADERS); do cp -L "$$h" $(DESTDIR)$(PREFIX)/include/fheplan/ && \
	  chmod 644 $(DESTDIR)$(PREFIX)/include/fheplan/$${h##*/}; done
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libfheplan.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libfheplan.so.$(SOVERSION)
	ln -sf libfheplan.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libfheplan.so
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/fheplan.pc $(BUILD)/fheplan-static.pc $(DESTDIR)$(PCDIR)/
	install -m 644 $(CMAKE_FILES) $(DESTDIR)$(CMAKEDIR)/
	for p in $(MANPAGES); do s=$${p##*.}; d=$(DESTDIR)$(PREFIX)/share/man/man$$s; \
	  install -d $$d && install -m 644 $$p $$d/ || exit 1; \
	  for n in $$($(MAN_LINKS) $$p); do [ "$$n.$$s" = "$${p##*/}" ] || \
	    ln -sf $${p##*/} $$d/$$n.$$s || exit 1; done; done
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 editors/bash/fheplan $(DESTDIR)$(PREFIX)/share/bash-completion/completions/fheplan
	install -d $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 644 editors/zsh/_fheplan $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_fheplan
	install -m 644 editors/fish/fheplan.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/fheplan.fish
	@echo "install: manual pages in $(PREFIX)/share/man. Where man does not look there:" \
	  "MANPATH=$(PREFIX)/share/man: man fheplan; for man -k and apropos, index them once:" \
	  "mandb $(PREFIX)/share/man"

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/fheplan
	rm -f $(DESTDIR)$(LIBDIR)/libfheplan.a $(DESTDIR)$(LIBDIR)/libfheplan.so* \
	  $(DESTDIR)$(PCDIR)/fheplan.pc $(DESTDIR)$(PCDIR)/fheplan-static.pc \
	  $(DESTDIR)$(PREFIX)/bin/fheplan
	rm -rf $(DESTDIR)$(CMAKEDIR)
	for p in $(MANPAGES); do s=$${p##*.}; d=$(DESTDIR)$(PREFIX)/share/man/man$$s; \
	  rm -f $$d/$${p##*/}; for n in $$($(MAN_LINKS) $$p); do \
	    [ "$$n.$$s" = "$${p##*/}" ] || rm -f $$d/$$n.$$s; done; done
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/fheplan
	rm -f $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_fheplan \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/fheplan.fish

# Builds every program in examples/ against a staged install, through pkg-config, once
# statically and once against the shared library, and runs it; then tests/man/consumers.sh
# builds what the documentation shows (fheplan-explicit(7)'s build lines, the CMake
# package, README's "Using the library") against a fresh install in a temporary prefix.
STAGE = $(abspath $(BUILD)/stage)
test-install:
	rm -rf $(STAGE) && $(MAKE) --no-print-directory install PREFIX=$(STAGE) >$(STAGE).log
	@grep -q "MANPATH=$(STAGE)/share/man: man fheplan" $(STAGE).log || \
	  { echo "test-install: install does not say how to reach the pages of PREFIX"; exit 1; }
	@mandb -q $(STAGE)/share/man && MANPATH=$(STAGE)/share/man: man -k fheplan | grep -q '^fheplan (1)' || \
	  { echo "test-install: man -k does not find fheplan(1) after the advice install gives"; exit 1; }
	@set -e; export PKG_CONFIG_PATH=$(STAGE)/lib/pkgconfig; pkg-config --exists fheplan; \
	cflags=$$(pkg-config --cflags fheplan); \
	static=$$(pkg-config --static --libs fheplan | sed 's/-lfheplan /-l:libfheplan.a /'); \
	shared=$$(pkg-config --libs fheplan); libdir=$$(pkg-config --variable=libdir fheplan); \
	mkdir -p $(BUILD)/examples; \
	for src in examples/*.c; do \
	  exe=$(BUILD)/examples/$$(basename $$src .c); \
	  $(CC) -std=c11 -Wall -Wextra -Werror $(SAN) $$cflags $$src -o $$exe-static $$static $(ALL_LDFLAGS); \
	  $(CC) -std=c11 -Wall -Wextra -Werror $(SAN) $$cflags $$src -o $$exe-shared $$shared \
	    -Wl,-rpath,$$libdir $(ALL_LDFLAGS); \
	  ! ldd $$exe-static | grep -q libfheplan; \
	  ldd $$exe-shared | grep -q "libfheplan.so.$(SOVERSION) => $$libdir"; \
	  echo "example $$src (static)"; $$exe-static; \
	  echo "example $$src (shared)"; $$exe-shared; \
	done
	@MAKE='$(MAKE)' BUILD='$(BUILD)' CC='$(CC)' SAN='$(SAN)' sh tests/man/consumers.sh
	@for f in bash-completion/completions/fheplan zsh/site-functions/_fheplan \
	  fish/vendor_completions.d/fheplan.fish; do test -f $(STAGE)/share/$$f || \
	  { echo "test-install: $$f is not installed"; exit 1; }; done

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
