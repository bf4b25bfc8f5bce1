# mk/phantom.mk — the Phantom example (examples/phantom/): `make phantom-example
# PHANTOM_SRC=DIR` patches the user's Phantom tree (three header accessors), builds it with
# CMake when its library is missing, compiles our adapter and driver and links them with
# libfheplan.a; `make phantom-bundle` also gathers a GPU-host bundle in .gpu/phantom.
# Phantom (GPLv3) is never copied into this repository nor linked into libfheplan.
# Not part of `make test`: CI has neither Phantom nor a GPU.

PHANTOM_SRC    ?=
PHANTOM_BUILD  ?= $(PHANTOM_SRC)/build
PHANTOM_LIB     = $(PHANTOM_BUILD)/lib/libPhantom.so
PHANTOM_OUT     = $(BUILD)/phantom
PHANTOM_BIN     = $(PHANTOM_OUT)/phantom-bsgs
PHANTOM_BUNDLE ?= .gpu/phantom
PHANTOM_ARCH   ?= 90
PHANTOM_NVCC    = $(NVCC) -O2 -std=c++17 -arch=sm_$(PHANTOM_ARCH) --default-stream per-thread \
                  -Xcompiler -fPIC -I. -Iinclude -I$(PHANTOM_SRC)/include

.PHONY: phantom-example phantom-bundle phantom-patch

phantom-patch:
	@[ -n "$(PHANTOM_SRC)" ] || { echo "phantom-example: set PHANTOM_SRC=DIR (a Phantom source tree)"; exit 2; }
	@[ "$(CUDA)" = 1 ] || { echo "phantom-example: needs a CUDA build ($(CUDA_HOME))"; exit 2; }
	examples/phantom/patch-phantom.sh $(PHANTOM_SRC)

# Phantom's own build, once: tests, examples, benchmarks and Python bindings off.
$(PHANTOM_LIB): | phantom-patch
	cmake -S $(PHANTOM_SRC) -B $(PHANTOM_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CUDA_ARCHITECTURES=$(PHANTOM_ARCH) -DPHANTOM_ENABLE_EXAMPLE=OFF \
	  -DPHANTOM_ENABLE_TEST=OFF -DPHANTOM_ENABLE_BENCH=OFF -DPHANTOM_ENABLE_PYTHON_BINDING=OFF
	cmake --build $(PHANTOM_BUILD) -j$${PHANTOM_JOBS:-2}

$(PHANTOM_OUT)/adapter.o: examples/phantom/adapter.cu examples/phantom/adapter.h $(PHANTOM_LIB) | phantom-patch
	@mkdir -p $(dir $@)
	$(PHANTOM_NVCC) -c $< -o $@

$(PHANTOM_OUT)/bsgs.o: examples/phantom/bsgs.c examples/phantom/adapter.h include/fheplan/cuda.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

# cudart is linked statically (libPhantom.so carries its own static copy as well): the GPU
# host needs only its driver, libPhantom.so and the shared libraries ldd lists.
$(PHANTOM_BIN): $(PHANTOM_OUT)/adapter.o $(PHANTOM_OUT)/bsgs.o $(BUILD)/libfheplan.a $(PHANTOM_LIB)
	$(CXX) -o $@ $(PHANTOM_OUT)/adapter.o $(PHANTOM_OUT)/bsgs.o $(BUILD)/libfheplan.a \
	  -L$(PHANTOM_BUILD)/lib -lPhantom -Wl,-rpath,'$$ORIGIN/lib:$(abspath $(PHANTOM_BUILD)/lib)' \
	  $(ALL_LDFLAGS) $(ALL_LDLIBS)

phantom-example: phantom-patch $(PHANTOM_BIN) $(BUILD)/fheplan
	@echo "phantom-example: built $(PHANTOM_BIN); run it on a GPU host (see examples/phantom/README.md)"

# The bundle that examples/phantom/gpu-run.sh runs on a GPU host without build tools.
# The CUDA backend's GPU suite (tests/gpu: the private pool, stream views) goes along.
phantom-bundle: phantom-example $(BUILD)/tests/gpu
	rm -rf $(PHANTOM_BUNDLE)
	sh examples/phantom/bundle.sh $(PHANTOM_BUNDLE) $(PHANTOM_BIN) $(BUILD)/fheplan \
	  $(BUILD)/tests/gpu
	cp examples/phantom/gpu-run.sh examples/phantom/bsgs.rplan examples/phantom/bsgs-seeded.rplan \
	  $(PHANTOM_BUNDLE)/
	@ls -la $(PHANTOM_BUNDLE) $(PHANTOM_BUNDLE)/lib
