# mk/lang.mk — the .rplan front end: re2c lexer and Bison parser generated into
# $(GEN), the golden-file updater and the compile benchmark.
GEN_SRCS += $(GEN)/lexer.c $(GEN)/parser.c
GEN_HDRS += $(GEN)/parser.h

$(GEN)/parser.c $(GEN)/parser.h &: grammar/parser.y
	@mkdir -p $(GEN)
	bison -Wall -Werror --header=$(GEN)/parser.h -o $(GEN)/parser.c $<

$(GEN)/lexer.c: grammar/lexer.re $(GEN)/parser.h
	@mkdir -p $(GEN)
	re2c -W -Werror --no-generation-date -o $@ $<

# The generated lexer includes parser.h: order it before the object.
$(BUILD)/obj/gen/lexer.o: $(GEN)/parser.h

# Rewrites the existing tests/plans/ok/*.dis (short goldens a person reviews; others are
# checked against their source) and tests/plans/fail/*.err from the current compiler.
.PHONY: update-golden bench-compile
update-golden: $(BUILD)/rplan-golden
	$(BUILD)/rplan-golden tests/plans

$(BUILD)/rplan-golden: tests/tools/golden.c $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libfheplan.a $(ALL_LDLIBS)

$(BUILD)/bench/compile: bench/compile.c $(BUILD)/libfheplan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libfheplan.a $(ALL_LDLIBS)

bench-compile: $(BUILD)/bench/compile
	$(BUILD)/bench/compile
