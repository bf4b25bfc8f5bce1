# mk/tools.mk — the tools around plan files: `make test-fmt` (every plan in plans/ is in
# fmt's layout), `make test-editors` (the editor grammars name every keyword and unit of
# the lexer; bash completion offers every option and only those) and `make test-timeline` (run --timeline renders in headless Chromium).
# Every manual page rendering without a groff warning is part of test-man.
.PHONY: test-fmt test-editors test-timeline
TEST_EXTRA += test-fmt test-editors test-timeline

test-fmt: $(BUILD)/fheplan
	$(BUILD)/fheplan fmt --check plans/*.rplan

test-editors: $(BUILD)/fheplan
	sh tests/tools/editors.sh
	BUILD='$(BUILD)' bash tests/tools/completion.sh

test-timeline: $(BUILD)/fheplan
	BUILD='$(BUILD)' sh tests/tools/timeline.sh

# The picture of the bootstrap run for bench/README.md: `make timeline-png` on the
# emulated device, `make timeline-png TIMELINE_DEVICE=cuda` on a GPU host (needs
# Chromium: make deps CHROMIUM=1). Writes bench/timeline-bootstrap-DEVICE.png.
TIMELINE_DEVICE ?= emu
.PHONY: timeline-png
timeline-png: $(BUILD)/fheplan
	$(BUILD)/fheplan run --device $(TIMELINE_DEVICE) --quiet \
	  --timeline $(BUILD)/timeline-bootstrap-$(TIMELINE_DEVICE).html plans/ckks-bootstrap.rplan
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
	  --user-data-dir=$(BUILD)/chromium-profile --window-size=1540,640 \
	  --screenshot=$(abspath bench/timeline-bootstrap-$(TIMELINE_DEVICE).png) \
	  file://$(abspath $(BUILD)/timeline-bootstrap-$(TIMELINE_DEVICE).html)
