# mk/python.mk — the Python binding (python/): `make python` builds the extension module
# `fheplan._fheplan` (C, over the public headers only, linked with the static library) into
# $(BUILD)/python, so that PYTHONPATH=$(BUILD)/python imports it; `make test-python` runs its
# pytest suite on the emulated device (part of `make test`). PYTHON picks the interpreter
# (Debian's /usr/bin/python3 when present: python3-dev, python3-numpy, python3-pytest).
# `pip install --no-build-isolation ./python` builds the same sources through python/setup.py.
# Not under SAN: an ASan library cannot be loaded into an interpreter built without it, so
# `make sanitize` leaves the binding out (its C core runs under ASan in the unit suite).
PYTHON     ?= $(firstword $(wildcard /usr/bin/python3) python3)
PY_DIR      = $(BUILD)/python
PY_SRCS    := $(wildcard python/src/*.c)
PY_HDRS    := $(wildcard python/src/*.h)
PY_PKG     := $(wildcard python/fheplan/*.py)
PY_EXT      = $(PY_DIR)/fheplan/_fheplan$(shell $(PYTHON) -c \
                'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_INC      = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' \
                2>/dev/null)
# The binding's C: the project's warnings, no -fvisibility=hidden games (one exported init).
PY_CFLAGS   = -std=c11 -Wall -Wextra -Werror -fPIC $(OPT) $(CFLAGS) -Wno-missing-field-initializers \
              -Wno-cast-function-type -fno-strict-aliasing
PY_CPPFLAGS = -D_GNU_SOURCE -Iinclude -Ipython/src -I$(PY_INC) $(CPPFLAGS)

.PHONY: python test-python python-flags
python: $(PY_EXT) $(patsubst python/fheplan/%,$(PY_DIR)/fheplan/%,$(PY_PKG))

# Prerequisites name the archive directly: STATIC is defined after this file is included.
$(PY_EXT): $(PY_SRCS) $(PY_HDRS) $(BUILD)/libfheplan.a $(wildcard include/fheplan/*.h)
	@[ -f "$(PY_INC)/Python.h" ] || { echo "python: no Python.h for $(PYTHON) (make deps installs python3-dev)"; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(PY_CPPFLAGS) $(PY_CFLAGS) -shared $(LDFLAGS) -o $@ $(PY_SRCS) $(STATIC) $(ALL_LDLIBS)

$(PY_DIR)/fheplan/%.py: python/fheplan/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# What python/setup.py links with (one line each: the static library, then the libraries).
python-flags: $(BUILD)/libfheplan.a
	@echo $(abspath $(STATIC))
	@echo $(ALL_LDLIBS)

# pytest exits 5 when it collected nothing; a suite that collected nothing has failed here.
# PYTHONMALLOC=debug: Python's allocator checks that every PyMem call holds the interpreter
# lock (one without it crashes Python 3.12 and later; 3.11 runs on without complaint).
ifeq ($(SAN),)
TEST_EXTRA += test-python
endif
test-python: python $(BUILD)/fheplan
	@cd $(PY_DIR) && PYTHONPATH=$(abspath $(PY_DIR)) FHEPLAN_DEVICE=emu FHEPLAN_REPO=$(CURDIR) \
	  PYTHONMALLOC=debug \
	  FHEPLAN_CLI=$(abspath $(BUILD)/fheplan) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider $(CURDIR)/python/tests; rc=$$?; \
	  if [ $$rc = 5 ]; then echo "test-python: pytest collected no tests"; exit 1; fi; exit $$rc

# The README's install command, offline, into a fresh virtual environment that sees Debian's
# packages (on Debian 12 the system pip refuses to install outside one: PEP 668).
.PHONY: test-python-install
ifeq ($(SAN),)
TEST_EXTRA += test-python-install
endif
test-python-install: $(BUILD)/libfheplan.a
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	$(PYTHON) -m venv --system-site-packages "$$d/venv"; \
	"$$d/venv/bin/pip" install -q --no-index --no-build-isolation ./python; \
	cd "$$d" && FHEPLAN_DEVICE=emu "$$d/venv/bin/python" -c 'import fheplan, numpy as np; \
	  m = fheplan.ResidencyManager(); a = np.arange(8.0); h = m.adopt(a); \
	  l = m.acquire(h, fheplan.PAGEABLE_HOST); \
	  assert np.from_dlpack(l[h]).ctypes.data == a.ctypes.data; l.release(); \
	  assert fheplan.__file__.startswith("'"$$d"'"); print("test-python-install: pip install --no-build-isolation ./python works offline")'
	@rm -rf python/build python/fheplan.egg-info
