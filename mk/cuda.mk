# mk/cuda.mk — build rules owned by cuda/: the GPU test binary (`make test-gpu`) and the
# transfer benchmark (`make bench-transfer`). Both need CUDA=1 and link cudart statically
# so they can be carried to a GPU host with just the shared libraries ldd lists.

GPU_TEST       := $(BUILD)/tests/gpu
GPU_TEST_OBJS   = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/gpu/*.c))
BENCH_TRANSFER := $(BUILD)/bench/transfer
BENCH_XFER_OBJ  = $(BUILD)/obj/bench/transfer.o

.PHONY: test-gpu bench-transfer

ifeq ($(CUDA),1)
# Prerequisites name the archive directly: STATIC is defined after this file is included.
$(GPU_TEST): $(GPU_TEST_OBJS) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(GPU_TEST_OBJS) $(BUILD)/libfheplan.a $(TEST_LIBS) $(ALL_LDLIBS)

$(BENCH_TRANSFER): $(BENCH_XFER_OBJ) $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_XFER_OBJ) $(BUILD)/libfheplan.a $(ALL_LDLIBS)

# Runs the GPU suite; without a GPU every test reports itself skipped.
test-gpu: $(GPU_TEST)
	$(GPU_TEST) --jobs=1

bench-transfer: $(BENCH_TRANSFER)
else
test-gpu bench-transfer:
	@echo "$@: needs a CUDA build (CUDA=1 and $(CUDA_HOME)/include/cuda_runtime.h); skipped"
endif
