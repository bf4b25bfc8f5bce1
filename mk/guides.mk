# mk/guides.mk — owned by the user guides (man/*.7): `make test-man` lints every page of
# man/ with mandoc, cross references included, and compiles and runs every example the
# guides mark as tested (tests/man/extract.sh pulls them out, tests/man/run.sh runs them).
.PHONY: test-man
TEST_EXTRA += test-man

# Prerequisites name the files directly: STATIC and CLI are defined after this file.
test-man: $(BUILD)/libfheplan.a $(BUILD)/fheplan
	BUILD='$(BUILD)' CC='$(CC)' LDLIBS='$(ALL_LDLIBS)' LDFLAGS='$(ALL_LDFLAGS)' SAN='$(SAN)' \
	  sh tests/man/run.sh
