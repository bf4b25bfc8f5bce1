# mk/cheddar.mk — the Cheddar example (examples/cheddar/): `make cheddar-example
# CHEDDAR_SRC=DIR RMM_SRC=DIR` copies the user's Cheddar tree into build/cheddar/src,
# patches the copy (examples/cheddar/patch-cheddar.sh), builds libcheddar.so and Cheddar's
# own bootstrapping test (unittest/boot_test) with CMake, offline: RMM (branch-22.12) serves
# as headers only, googletest and nlohmann-json come from Debian packages
# (examples/cheddar/cheddar-deps.sh writes the stand-ins). When the example's own sources
# are present (examples/cheddar/adapter.cu and a boot*.c driver) it also builds the example
# and links it with libfheplan.a. `make cheddar-bundle` gathers the programs, their shared
# libraries and Cheddar's parameter files for a GPU host in .gpu/cheddar. `make
# cheddar-clean` removes build/cheddar. Cheddar (MIT) and RMM (Apache-2.0) are never copied
# into this repository nor linked into libfheplan. Not part of `make test`: CI has neither
# Cheddar nor a GPU.

CHEDDAR_SRC     ?=
RMM_SRC         ?=
CHEDDAR_ARCH    ?= 90
CHEDDAR_JOBS    ?= 2
CHEDDAR_OUT      = $(BUILD)/cheddar
CHEDDAR_TREE     = $(CHEDDAR_OUT)/src
CHEDDAR_BUILD    = $(CHEDDAR_OUT)/build
CHEDDAR_DEPS     = $(CHEDDAR_OUT)/deps
CHEDDAR_LIB      = $(CHEDDAR_BUILD)/libcheddar.so
CHEDDAR_BOOT     = $(CHEDDAR_BUILD)/unittest/boot_test
CHEDDAR_BUNDLE  ?= .gpu/cheddar
CHEDDAR_DEBS     = libtommath-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libgtest-dev \
                   googletest cmake ninja-build

# The example proper, once its sources exist.
CHEDDAR_ADAPTER  = $(wildcard examples/cheddar/adapter.cu)
CHEDDAR_DRIVER   = $(firstword $(wildcard examples/cheddar/boot*.c))
CHEDDAR_BIN      = $(if $(and $(CHEDDAR_ADAPTER),$(CHEDDAR_DRIVER)),$(CHEDDAR_OUT)/cheddar-boot)
CHEDDAR_NVCC     = $(NVCC) -O2 -std=c++17 -arch=sm_$(CHEDDAR_ARCH) -Xcompiler -fPIC \
                   -DENABLE_EXTENSION -DFMT_SHARED -DSPDLOG_FMT_EXTERNAL -I. -Iinclude \
                   -I$(CHEDDAR_DEPS)/include -I$(CHEDDAR_TREE)/include -I$(RMM_SRC)/include

.PHONY: cheddar-example cheddar-bundle cheddar-check cheddar-deps cheddar-patch cheddar-lib \
        cheddar-clean cheddar-plan-test

cheddar-check:
	@[ -n "$(CHEDDAR_SRC)" ] && [ -f "$(CHEDDAR_SRC)/include/extension/BootContext.h" ] || { \
	  echo "cheddar-example: set CHEDDAR_SRC=DIR (a Cheddar source tree; '$(CHEDDAR_SRC)' is not one)"; exit 2; }
	@[ -n "$(RMM_SRC)" ] && [ -f "$(RMM_SRC)/include/rmm/device_uvector.hpp" ] || { \
	  echo "cheddar-example: set RMM_SRC=DIR (an RMM source tree, branch-22.12; '$(RMM_SRC)' is not one)"; exit 2; }
	@[ "$(CUDA)" = 1 ] || { echo "cheddar-example: needs a CUDA build ($(CUDA_HOME))"; exit 2; }

# Debian packages Cheddar's build needs, installed only when missing.
cheddar-deps:
	@missing=""; for p in $(CHEDDAR_DEBS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "cheddar-deps: installing$$missing"; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# The copy is made once (the stamp); the patch runs every time and does nothing on a
# patched copy. `make cheddar-clean` starts over from the user's tree.
# The copy dereferences links (CHEDDAR_SRC itself may be one): the patch writes only here.
$(CHEDDAR_TREE)/.fheplan-copy: | cheddar-check
	rm -rf $(CHEDDAR_TREE)
	mkdir -p $(CHEDDAR_TREE)
	cp -RL $(CHEDDAR_SRC)/. $(CHEDDAR_TREE)/
	rm -rf $(CHEDDAR_TREE)/build $(CHEDDAR_TREE)/.git
	@touch $@

cheddar-patch: cheddar-check $(CHEDDAR_TREE)/.fheplan-copy
	sh examples/cheddar/patch-cheddar.sh $(CHEDDAR_TREE)
	sh examples/cheddar/cheddar-deps.sh $(CHEDDAR_DEPS) $(RMM_SRC)

# Configured again when this file changes. The run paths let libcheddar.so find its own
# libraries beside it (libtommath, libfmt, libcudart in a bundle's lib/: a run path of the
# program does not reach the libraries of its libraries) and boot_test find lib/.
$(CHEDDAR_BUILD)/CMakeCache.txt: mk/cheddar.mk | cheddar-deps cheddar-patch
	cmake -S $(CHEDDAR_TREE) -B $(CHEDDAR_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=$(NVCC) \
	  -DCMAKE_BUILD_RPATH='$$ORIGIN;$$ORIGIN/lib' \
	  -DCHEDDAR_CUDA_ARCHITECTURES=$(CHEDDAR_ARCH) \
	  -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
	  -DFETCHCONTENT_SOURCE_DIR_RMM=$(abspath $(CHEDDAR_DEPS))/rmm \
	  -DFETCHCONTENT_SOURCE_DIR_JSONCPP=$(abspath $(CHEDDAR_DEPS))/json \
	  -DFETCHCONTENT_SOURCE_DIR_GOOGLETEST=/usr/src/googletest \
	  -DBUILD_GMOCK=OFF -DINSTALL_GTEST=OFF -DENABLE_EXTENSION=ON -DBUILD_UNITTEST=ON

# CMake tracks Cheddar's own dependencies: make always asks it (FORCE), and what links
# libcheddar.so is rebuilt only when the library's time stamp changed.
$(CHEDDAR_LIB): FORCE | cheddar-deps cheddar-patch $(CHEDDAR_BUILD)/CMakeCache.txt
	cmake --build $(CHEDDAR_BUILD) -j$(CHEDDAR_JOBS) --target cheddar boot_test

cheddar-lib: $(CHEDDAR_LIB)

ifneq ($(CHEDDAR_BIN),)
$(CHEDDAR_OUT)/adapter.o: $(CHEDDAR_ADAPTER) $(wildcard examples/cheddar/adapter*.h) $(CHEDDAR_LIB)
	@mkdir -p $(dir $@)
	$(CHEDDAR_NVCC) -c $< -o $@

$(CHEDDAR_OUT)/driver.o: $(CHEDDAR_DRIVER) $(wildcard examples/cheddar/adapter*.h) include/fheplan/cuda.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

# cudart comes as libcheddar.so has it (shared, libcudart.so.13); the bundle carries it.
$(CHEDDAR_BIN): $(CHEDDAR_OUT)/adapter.o $(CHEDDAR_OUT)/driver.o $(BUILD)/libfheplan.a $(CHEDDAR_LIB)
	$(CXX) -o $@ $(CHEDDAR_OUT)/adapter.o $(CHEDDAR_OUT)/driver.o $(BUILD)/libfheplan.a \
	  -L$(CHEDDAR_BUILD) -lcheddar -L$(CUDA_HOME)/lib64 -lcudart -lfmt \
	  -Wl,-rpath,'$$ORIGIN/lib:$(abspath $(CHEDDAR_BUILD))' $(ALL_LDFLAGS) $(ALL_LDLIBS)
endif

# The driver's plans without a GPU or Cheddar: boot.c's plan writer over a model of
# bootparam_40's keys and phases, every plan checked by fheplan (examples/cheddar/plan-test.c).
# boot.c includes fheplan/cuda.h: a CUDA build, no GPU.
CHEDDAR_PLAN_TEST = $(CHEDDAR_OUT)/plan-test
$(CHEDDAR_PLAN_TEST): examples/cheddar/plan-test.c examples/cheddar/boot.c \
                      examples/cheddar/adapter.h $(BUILD)/libfheplan.a
	@[ "$(CUDA)" = 1 ] || { echo "cheddar-plan-test: needs a CUDA build ($(CUDA_HOME))"; exit 2; }
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -Iexamples/cheddar $< -o $@ $(BUILD)/libfheplan.a \
	  $(ALL_LDFLAGS) $(ALL_LDLIBS)

# In make test where the build has CUDA (the plan writer includes fheplan/cuda.h).
ifeq ($(CUDA),1)
ifeq ($(SAN),)
TEST_EXTRA += cheddar-plan-test
endif
endif
cheddar-plan-test: $(CHEDDAR_PLAN_TEST) $(BUILD)/fheplan
	rm -rf $(CHEDDAR_OUT)/plan-test-out && mkdir -p $(CHEDDAR_OUT)/plan-test-out
	$(CHEDDAR_PLAN_TEST) $(BUILD)/fheplan $(CHEDDAR_OUT)/plan-test-out

cheddar-example: cheddar-lib $(CHEDDAR_BIN) $(if $(CHEDDAR_BIN),$(BUILD)/fheplan)
	@echo "cheddar-example: built $(CHEDDAR_LIB) and $(CHEDDAR_BOOT)$(if $(CHEDDAR_BIN), and $(CHEDDAR_BIN))"
	@echo "cheddar-example: run them on a GPU host (see examples/cheddar/README.md)"

# The programs, their shared libraries (libcheddar.so, libcudart.so.13, libtommath.so.1,
# libfmt.so.9, ...) and Cheddar's parameter files, as plain files, for a GPU host.
# The example's run script goes along when it exists.
cheddar-bundle: cheddar-example
	sh examples/cheddar/bundle.sh $(CHEDDAR_BUNDLE) $(CHEDDAR_TREE)/parameters $(CHEDDAR_BOOT) \
	  $(CHEDDAR_BIN) $(if $(CHEDDAR_BIN),$(BUILD)/fheplan)
	$(if $(wildcard examples/cheddar/gpu-run.sh),cp examples/cheddar/gpu-run.sh $(CHEDDAR_BUNDLE)/)
	@ls -la $(CHEDDAR_BUNDLE) $(CHEDDAR_BUNDLE)/lib

cheddar-clean:
	rm -rf $(CHEDDAR_OUT)
