# mk/bench.mk — the bootstrap benchmarks: `make bench-bootstrap` (the plan under four budgets,
# two batch sizes and both policies) and `make bench-seeded` (plain against seeded keys),
# both running their plans through bench/plan_runner.c.

BENCH_BOOT     := $(BUILD)/bench/bootstrap
BENCH_BOOT_OBJ  = $(BUILD)/obj/bench/bootstrap.o $(BUILD)/obj/bench/schedule.o \
                  $(BUILD)/obj/bench/plan_runner.o

.PHONY: bench-bootstrap

$(BENCH_BOOT): $(BENCH_BOOT_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_BOOT_OBJ) $(BUILD)/libfheplan.a $(ALL_LDLIBS)

bench-bootstrap: $(BENCH_BOOT)
	$(BENCH_BOOT)

# The bootstrap table in parts (--keys, --batch, --sequence), on the model (no device):
# exactly the cells asked for, in order, and a key set the table does not have refused.
.PHONY: test-bench-cells
TEST_EXTRA += test-bench-cells
test-bench-cells: $(BENCH_BOOT)
	@out=$$($(BENCH_BOOT) --model --keys 100,50 --batch 16) || exit 1; \
	got=$$(printf '%s\n' "$$out" | awk '$$1 ~ /%$$/ {printf "%s %s %s;", $$1, $$2, $$3}'); \
	[ "$$got" = "50% 16 once;100% 16 once;" ] || \
	  { echo "test-bench-cells: --keys 100,50 --batch 16 gave '$$got'"; exit 1; }; \
	got=$$($(BENCH_BOOT) --model --keys 25 --sequence twice | awk '$$1 ~ /%$$/ {printf "%s %s %s;", $$1, $$2, $$3}'); \
	[ "$$got" = "25% 1 twice;" ] || \
	  { echo "test-bench-cells: --keys 25 --sequence twice gave '$$got'"; exit 1; }; \
	for bad in "--keys 30" "--keys 25,," "--keys ''" "--batch 2" "--sequence thrice"; do \
	  eval "$(BENCH_BOOT) --model $$bad" >/dev/null 2>&1; rc=$$?; \
	  [ $$rc -eq 2 ] || { echo "test-bench-cells: '$$bad' exited $$rc, not 2"; exit 1; }; \
	done; \
	echo "test-bench-cells: ok (cells chosen by --keys, --batch and --sequence; bad lists refused)"

# The seeded-key benchmark (`make bench-seeded`): plain against seeded bootstrap keys in
# one run, and the device rate of the built-in counter generator.
BENCH_SEEDED     := $(BUILD)/bench/seeded
BENCH_SEEDED_OBJ  = $(BUILD)/obj/bench/seeded.o $(BUILD)/obj/bench/plan_runner.o

.PHONY: bench-seeded

$(BENCH_SEEDED): $(BENCH_SEEDED_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_SEEDED_OBJ) $(BUILD)/libfheplan.a $(ALL_LDLIBS)

bench-seeded: $(BENCH_SEEDED)
	$(BENCH_SEEDED)

# How close prefetching bootstrap runs come to Belady's MIN (a ratio; bench/prefetch.sh).
.PHONY: bench-prefetch
bench-prefetch: $(BUILD)/fheplan $(BUILD)/jsonq
	sh bench/prefetch.sh $(BUILD)

# The two-GPU measurements (bench/two-gpu.sh): the peer link beside pinned, the two-GPU
# plan, two independent MPI ranks. Exit 77 (skipped) with fewer than two GPUs;
# `make bench-two-gpu-emu` rehearses the script on the emulated device.
.PHONY: bench-two-gpu bench-two-gpu-emu
bench-two-gpu: $(BUILD)/fheplan $(BUILD)/jsonq bench-transfer
	sh bench/two-gpu.sh $(BUILD)
bench-two-gpu-emu: $(BUILD)/fheplan $(BUILD)/jsonq
	sh bench/two-gpu.sh --emu $(BUILD)

# The host side of pageable staging on the emulated device (`make bench-staging`; no GPU):
# the CUDA backend's chunk plan and pipeline, the emulated device doing the DMA.
BENCH_STAGING     := $(BUILD)/bench/staging
BENCH_STAGING_OBJ  = $(BUILD)/obj/bench/staging.o

.PHONY: bench-staging

$(BENCH_STAGING): $(BENCH_STAGING_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_STAGING_OBJ) $(BUILD)/libfheplan.a $(ALL_LDLIBS)

bench-staging: $(BENCH_STAGING)
	$(BENCH_STAGING)

# How `fheplan check` scales with values and requests (bench/scale.sh): generated plans of
# up to a million values and 300,000 requests, median wall time and peak memory of three
# runs each. `sh bench/scale.sh plan VALUES REQUESTS [POLICY]` writes one such plan.
.PHONY: bench-scale
bench-scale: $(BUILD)/fheplan
	sh bench/scale.sh run $(BUILD)
