# mk/oracle.mk — the differential oracle (tests/oracle/, see its README.md): random valid
# plans, each checked and run on the emulated device with the same options, the two
# reports compared field by field, plus the case files of tests/oracle/cases/.
#   make oracle [N=300] [SEED=S] [REPEAT=R] [JOBS=2]   as many plans as asked (SEED: the
#       current time unless given; REPEAT: each run R times, runs that differ flagged)
#   make test-oracle                                   the fixed set of make test
ORACLE          := $(BUILD)/tests/oracle
ORACLE_OBJS      = $(BUILD)/obj/tests/oracle/oracle.o $(BUILD)/obj/tests/oracle/gen.o
ORACLE_CASES     = $(sort $(wildcard tests/oracle/cases/*.rplan))
# (under a sanitizer, make sanitize, fewer: each run is several times slower there)
ORACLE_FIXED_N  ?= $(if $(SAN),60,300)
ORACLE_FIXED_SEED ?= 1
# The fixed set runs in make test (ORACLE_IN_TEST=0 leaves it out): check and run agree
# by construction (fheplan(1), One schedule), and the set must stay at zero disagreements.
ORACLE_IN_TEST  ?= 1
TEST_EXTRA      += $(if $(filter 1,$(ORACLE_IN_TEST)),test-oracle)
N      ?= 300
SEED   ?= $(shell date +%s)
REPEAT ?= 1
JOBS   ?= 2

.PHONY: oracle test-oracle

$(ORACLE): $(ORACLE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(ORACLE_OBJS) -lcjson

oracle: $(ORACLE) $(BUILD)/fheplan
	$(ORACLE) --fheplan $(BUILD)/fheplan --seed $(SEED) -n $(N) --repeat $(REPEAT) \
	  --jobs $(JOBS) --save $(BUILD)/oracle $(ORACLE_CASES)

# A few hundred plans of a fixed seed and every case file; fails on any disagreement.
# Saved reproducers go to $(BUILD)/oracle/seed-*.rplan (each a case file: the plan and, in
# its "# oracle:" line, the options).
test-oracle: $(ORACLE) $(BUILD)/fheplan
	$(ORACLE) --fheplan $(BUILD)/fheplan --seed $(ORACLE_FIXED_SEED) -n $(ORACLE_FIXED_N) \
	  --measured 2 --jobs 2 --max-print 10 --save $(BUILD)/oracle $(ORACLE_CASES)

# The --min-budget tests run the fheplan binary of the same build.
$(BUILD)/obj/tests/unit/test_min_budget.o: FHR_CPPFLAGS += -DFHEPLAN_CLI='"$(BUILD)/fheplan"'
