# mk/controller.mk — build rules owned by the controller layer: the policy benchmark
# (`make bench-policy`: decide() latency at 10..10,000 resident values). Needs no GPU.

BENCH_POLICY     := $(BUILD)/bench/policy
BENCH_POLICY_OBJ  = $(BUILD)/obj/bench/policy.o

.PHONY: bench-policy

# The prerequisite names the archive directly: STATIC is defined after this file is included.
$(BENCH_POLICY): $(BENCH_POLICY_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_POLICY_OBJ) $(STATIC) $(ALL_LDLIBS)

bench-policy: $(BENCH_POLICY)
	$(BENCH_POLICY)

# The request path (`make bench-request`): use_begin + use_end at 10..10,000 resident values.
BENCH_REQUEST     := $(BUILD)/bench/request
BENCH_REQUEST_OBJ  = $(BUILD)/obj/bench/request.o

.PHONY: bench-request

$(BENCH_REQUEST): $(BENCH_REQUEST_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(BENCH_REQUEST_OBJ) $(BUILD)/libfheplan.a $(LDLIBS)

bench-request: $(BENCH_REQUEST)
	$(BENCH_REQUEST)
