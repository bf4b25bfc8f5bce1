# mk/guides.mk — owned by the manual (man/): `make test-man` lints every page of man/ with
# mandoc, cross references included, checks that every exported or declared function has
# a section-3 page that `man NAME` finds after `make install`, and compiles and runs every
# example the pages mark as tested (tests/man/extract.sh pulls them out, tests/man/run.sh
# runs them).
.PHONY: test-man
TEST_EXTRA += test-man

# Prerequisites name the files directly: STATIC and CLI are defined after this file.
test-man: $(BUILD)/libfheplan.a $(BUILD)/libfheplan.so $(BUILD)/fheplan
	BUILD='$(BUILD)' MAKE='$(MAKE)' CC='$(CC)' LDLIBS='$(ALL_LDLIBS)' LDFLAGS='$(ALL_LDFLAGS)' SAN='$(SAN)' \
	  sh tests/man/run.sh
