# mk/mpi.mk — scale-out: the fheplan command as an MPI program (Open MPI from Debian:
# libopenmpi-dev, openmpi-bin; `make deps` installs them). MPI=1, the default when mpicc
# is found, compiles cli/mpi.c with mpicc's flags and links the command with Open MPI;
# the library itself never sees MPI. MPI=0 builds fheplan without it. `make test-mpi`
# runs two- and four-rank jobs on the emulated device (part of `make test` with MPI=1).

MPICC      ?= mpicc
# what `make deps` installs: nothing when MPI=0 was asked for
MPI_DEBS   := $(if $(filter 0,$(MPI)),,libopenmpi-dev openmpi-bin)
MPI        ?= $(if $(shell command -v $(MPICC) 2>/dev/null),1,0)
JSONQ      := $(BUILD)/jsonq

.PHONY: test-mpi
TEST_EXTRA += test-mpi # with MPI=0 it says that it was skipped

ifeq ($(MPI),1)
MPI_CFLAGS := $(shell $(MPICC) --showme:compile)
MPI_LIBS   := $(shell $(MPICC) --showme:link)
$(BUILD)/obj/cli/mpi.o: FHR_CPPFLAGS += -DFHEPLAN_HAVE_MPI=1 $(MPI_CFLAGS)
$(BUILD)/fheplan: FHR_LDLIBS += $(MPI_LIBS)

test-mpi: $(BUILD)/fheplan $(JSONQ)
	tests/mpi/run.sh $(BUILD)/fheplan $(JSONQ)
else
test-mpi:
	@echo "test-mpi: needs an MPI build (MPI=1 and $(MPICC)); skipped"
endif

# cli/mpi.o is built with or without MPI: rebuild it (and relink) when that changes.
$(BUILD)/obj/cli/mpi.o: $(BUILD)/mpi.stamp
$(BUILD)/mpi.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo 'MPI=$(MPI) $(MPI_CFLAGS) $(MPI_LIBS)' | cmp -s - $@ || \
	  echo 'MPI=$(MPI) $(MPI_CFLAGS) $(MPI_LIBS)' > $@

$(JSONQ): tests/tools/jsonq.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< -lcjson
