# mk/bench.mk — the bootstrap benchmark (`make bench-bootstrap`): the bootstrap plan
# under four budgets, two batch sizes and both policies, in one run, on a CUDA device.

BENCH_BOOT     := $(BUILD)/bench/bootstrap
BENCH_BOOT_OBJ  = $(BUILD)/obj/bench/bootstrap.o $(BUILD)/obj/bench/schedule.o

.PHONY: bench-bootstrap

$(BENCH_BOOT): $(BENCH_BOOT_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_BOOT_OBJ) $(BUILD)/libfheplan.a $(ALL_LDLIBS)

bench-bootstrap: $(BENCH_BOOT)
	$(BENCH_BOOT)

# How close prefetching bootstrap runs come to Belady's MIN (a ratio; bench/prefetch.sh).
.PHONY: bench-prefetch
bench-prefetch: $(BUILD)/fheplan $(BUILD)/jsonq
	sh bench/prefetch.sh $(BUILD)
