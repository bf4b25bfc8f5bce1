# mk/vm.mk — owned by the VM and the fheplan command: the C++ runtime the CUDA kernels
# need (nvcc's generated host stubs use it), and `make example`, the main job.

ifeq ($(CUDA),1)
FHR_LDLIBS += -lstdc++
endif

.PHONY: example example-run
# Installs what is missing, builds, then checks and runs the bootstrap plan: on the
# GPU when one is visible, else on the emulated device (where fheplan scales the sizes
# down by itself; see fheplan(1), --scale).
example: deps
	@$(MAKE) --no-print-directory example-run

example-run: all
	$(BUILD)/fheplan check plans/ckks-bootstrap.rplan
	$(BUILD)/fheplan run --device auto plans/ckks-bootstrap.rplan
