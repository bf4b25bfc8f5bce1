# mk/fuzz.mk — fuzz targets in tests/fuzz/ (one file per target, libFuzzer entry points).
# `make fuzz` runs each for FUZZ_TIME seconds; `make fuzz-replay` (part of `make test`
# through TEST_EXTRA) replays every in-tree corpus input through the plain driver (the
# build's own compiler and flags, ASan under make sanitize); `make fuzz-check` (make
# test-long) runs the libFuzzer builds over the corpus plus a deterministic run of
# FUZZ_CHECK_RUNS mutations, and the plain driver. See tests/fuzz/README.md.
FUZZ_TARGETS    := compile load roundtrip format
FUZZ_CC         ?= clang
FUZZ_BUILD      := build/fuzz
FUZZ_CORPUS     := tests/fuzz/corpus
FUZZ_TIME       ?= 60
FUZZ_JOBS       ?= 1
FUZZ_CHECK_RUNS ?= 10000
FUZZ_SAN        := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_DICT_compile   := -dict=tests/fuzz/rplan.dict
FUZZ_DICT_roundtrip := -dict=tests/fuzz/rplan.dict
FUZZ_DICT_format    := -dict=tests/fuzz/rplan.dict
FUZZ_HDRS       := tests/fuzz/fuzz.h tests/fuzz/fuzz_explain.h tests/fuzz/fuzz_oracle.h
FUZZ_BINS        = $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))
FUZZ_PLAIN_BINS  = $(patsubst %,$(BUILD)/fuzz-plain/fuzz_%,$(FUZZ_TARGETS))
FUZZ_SEED_SRCS   = $(wildcard plans/*.rplan tests/plans/ok/*.rplan tests/plans/fail/*.rplan)
FUZZ_OPTS        = -timeout=60 -rss_limit_mb=4096 -print_final_stats=1
# parallel workers only when asked for (libFuzzer then writes fuzz-N.log in the current folder)
FUZZ_PAR         = $(if $(filter-out 1,$(FUZZ_JOBS)),-jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS))

TEST_EXTRA += fuzz-replay

.PHONY: fuzz fuzz-build fuzz-check fuzz-plain fuzz-replay fuzz-seed fuzz-merge

# libFuzzer binaries: a separate tree (build/fuzz, CUDA off) whose library objects carry
# the fuzzer's coverage hooks and ASan+UBSan; built by a recursive make with clang.
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CUDA=0 CC=$(FUZZ_CC) OPT='-O1 -g' \
	  SAN='-fsanitize=fuzzer-no-link $(FUZZ_SAN)' $(FUZZ_BINS)

ifeq ($(BUILD),$(FUZZ_BUILD))
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_HDRS) $(BUILD)/libfheplan.a
	$(CC) $(ALL_CPPFLAGS) -Itests/fuzz $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< \
	  $(BUILD)/libfheplan.a $(ALL_LDLIBS)
endif

# The same targets behind a plain main() (tests/fuzz/driver.c), built by $(CC): the form
# AFL++ (CC=afl-clang-fast) and gcc use.
fuzz-plain: $(FUZZ_PLAIN_BINS)
$(BUILD)/fuzz-plain/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/driver.c $(FUZZ_HDRS) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) -Itests/fuzz $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< tests/fuzz/driver.c \
	  $(BUILD)/libfheplan.a $(ALL_LDLIBS)

# The regression check of `make test`: every corpus input of every target, through the
# plain driver; no libFuzzer build (that one is a second build of the whole library).
fuzz-replay: fuzz-plain
	@for t in $(FUZZ_TARGETS); do \
	  n=$$(ls $(FUZZ_CORPUS)/$$t | wc -l); \
	  $(BUILD)/fuzz-plain/fuzz_$$t $(FUZZ_CORPUS)/$$t >$(BUILD)/fuzz-plain/$$t.log 2>&1 || \
	    { tail -40 $(BUILD)/fuzz-plain/$$t.log; echo "fuzz-replay: $$t FAILED"; exit 1; }; \
	  echo "fuzz-replay: $$t: $$n corpus inputs, no crash"; \
	done

# The regression check of `make test-long`: every corpus input, then exactly FUZZ_CHECK_RUNS
# mutations (seed 1, no time cap: the same inputs on any machine) per target; new inputs
# go to a scratch folder.
fuzz-check: fuzz-build fuzz-plain
	@fail=0; pass=0; for t in $(FUZZ_TARGETS); do \
	  w=$(FUZZ_BUILD)/check/$$t; rm -rf $$w; mkdir -p $$w; \
	  n=$$(ls $(FUZZ_CORPUS)/$$t | wc -l); \
	  if $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_OPTS) -seed=1 -runs=$(FUZZ_CHECK_RUNS) \
	       -artifact_prefix=$$w/ $$w $(FUZZ_CORPUS)/$$t \
	       >$$w.log 2>&1 \
	     && $(BUILD)/fuzz-plain/fuzz_$$t $(FUZZ_CORPUS)/$$t >>$$w.log 2>&1; then \
	    pass=$$((pass+1)); \
	    echo "fuzz-check: $$t: $$n corpus inputs, $$(sed -n 's/.*stat::number_of_executed_units: *//p' $$w.log) executions, no crash"; \
	  else \
	    fail=$$((fail+1)); tail -40 $$w.log; echo "fuzz-check: $$t FAILED (log: $$w.log)"; \
	  fi; \
	done; echo "fuzz-check: $$pass passed, $$fail failed"; [ $$fail = 0 ]

# Long runs: each target for FUZZ_TIME seconds (FUZZ_JOBS processes) over its in-tree
# corpus; new inputs collect in build/fuzz/corpus/<target>, crashes in build/fuzz/crash/.
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crash; \
	  echo "fuzz: $$t for $(FUZZ_TIME) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_OPTS) $(FUZZ_DICT_$$t) -max_total_time=$(FUZZ_TIME) \
	    $(FUZZ_PAR) -artifact_prefix=$(FUZZ_BUILD)/crash/$$t- \
	    $(FUZZ_BUILD)/corpus/$$t $(FUZZ_CORPUS)/$$t || exit 1; \
	done

# Folds what `make fuzz` found into the in-tree corpus, keeping only inputs that add coverage.
fuzz-merge: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_BUILD)/fuzz_$$t -merge=1 $(FUZZ_CORPUS)/$$t $(FUZZ_BUILD)/corpus/$$t || exit 1; \
	done

# Regenerates the seed-* inputs of every corpus from plans/ and tests/plans/.
fuzz-seed: $(BUILD)/fuzz-seed
	@for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_CORPUS)/$$t; rm -f $(FUZZ_CORPUS)/$$t/seed-*; done
	$(BUILD)/fuzz-seed $(FUZZ_CORPUS) $(FUZZ_SEED_SRCS)
$(BUILD)/fuzz-seed: tests/fuzz/seed.c $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libfheplan.a $(ALL_LDLIBS)
