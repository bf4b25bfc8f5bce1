# mk/python.mk — the Python binding (python/): `make python` builds the extension module
# `fheplan._fheplan` (C, over the public headers only, linked with the static library) into
# $(BUILD)/python, so that PYTHONPATH=$(BUILD)/python imports it; `make test-python` runs its
# pytest suite on the emulated device (part of `make test`). PYTHON picks the interpreter
# (Debian's /usr/bin/python3 when present: python3-dev, python3-numpy, python3-pytest).
# `pip install --no-build-isolation ./python` builds the same sources through python/setup.py.
# Under `make sanitize` (SAN has -fsanitize=address) the extension is built with the same
# sanitizers into build/asan/python and the whole pytest suite runs with the compiler's ASan
# runtime preloaded into the interpreter (test-python-asan); `make test-python-types` checks
# the suite with mypy --strict against the package's stubs (python/fheplan/*.pyi).
PYTHON     ?= $(firstword $(wildcard /usr/bin/python3) python3)
PY_DIR      = $(BUILD)/python
PY_SRCS    := $(wildcard python/src/*.c)
PY_HDRS    := $(wildcard python/src/*.h)
PY_PKG     := $(wildcard python/fheplan/*.py python/fheplan/*.pyi python/fheplan/py.typed)
PY_EXT      = $(PY_DIR)/fheplan/_fheplan$(shell $(PYTHON) -c \
                'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_INC      = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' \
                2>/dev/null)
# The binding's C: the project's warnings, no -fvisibility=hidden games (one exported init);
# SAN's sanitizers when the library has them (make sanitize).
PY_CFLAGS   = -std=c11 -Wall -Wextra -Werror -fPIC $(OPT) $(SAN) $(CFLAGS) -Wno-missing-field-initializers \
              -Wno-cast-function-type -fno-strict-aliasing
PY_CPPFLAGS = -D_GNU_SOURCE -Iinclude -Ipython/src -I$(PY_INC) $(CPPFLAGS)

.PHONY: python test-python python-flags
python: $(PY_EXT) $(patsubst python/fheplan/%,$(PY_DIR)/fheplan/%,$(PY_PKG))

# Prerequisites name the archive directly: STATIC is defined after this file is included.
$(PY_EXT): $(PY_SRCS) $(PY_HDRS) $(BUILD)/libfheplan.a $(wildcard include/fheplan/*.h)
	@[ -f "$(PY_INC)/Python.h" ] || { echo "python: no Python.h for $(PYTHON) (make deps installs python3-dev)"; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(PY_CPPFLAGS) $(PY_CFLAGS) -shared $(LDFLAGS) -o $@ $(PY_SRCS) $(STATIC) $(ALL_LDLIBS)

$(PY_DIR)/fheplan/%: python/fheplan/%
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
# PY_ENV: what else the interpreter runs with (test-python-asan: the sanitizer runtime).
PY_PYTEST = cd $(PY_DIR) && PYTHONPATH=$(abspath $(PY_DIR)) FHEPLAN_DEVICE=emu FHEPLAN_REPO=$(CURDIR) \
	  FHEPLAN_CLI=$(abspath $(BUILD)/fheplan) $(PY_ENV) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider $(CURDIR)/python/tests; rc=$$?; \
	  if [ $$rc = 5 ]; then echo "$@: pytest collected no tests"; exit 1; fi; exit $$rc
test-python: PY_ENV = PYTHONMALLOC=debug
test-python: python $(BUILD)/fheplan
	@$(PY_PYTEST)

# The whole suite under ASan and UBSan (make sanitize): the interpreter is not built with
# them, so the runtime of the compiler that built the extension is preloaded (it must come
# first); Python's objects come from malloc so that ASan sees every one of them, and the
# interpreter's own leaks at exit are not reported. Child interpreters inherit all of it.
PY_SAN_LIBS = $(foreach l,$(if $(findstring address,$(SAN)),libasan.so) \
                $(if $(findstring undefined,$(SAN)),libubsan.so),$(shell $(CC) -print-file-name=$(l)))
ifneq ($(findstring address,$(SAN)),)
TEST_EXTRA += test-python-asan
endif
test-python-asan: PY_ENV = PYTHONMALLOC=malloc LD_PRELOAD="$(PY_SAN_LIBS)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:malloc_context_size=8
.PHONY: test-python-asan
test-python-asan: python $(BUILD)/fheplan
	@case "$(SAN)" in *address*) ;; *) echo "$@: run it through make sanitize (SAN has no -fsanitize=address)"; exit 1;; esac
	@for l in $(PY_SAN_LIBS); do [ -f "$$l" ] || { echo "$@: $(CC) has no shared sanitizer runtime $$l to preload"; exit 1; }; done
	@echo "$@: pytest with LD_PRELOAD=$(PY_SAN_LIBS)"
	@$(PY_PYTEST)

# mypy --strict over the test suite, against the stubs of the package (python/fheplan/*.pyi,
# shipped with py.typed): every name, argument and attribute the tests use must be declared.
.PHONY: test-python-types
ifeq ($(SAN),)
TEST_EXTRA += test-python-types
endif
test-python-types:
	@command -v mypy >/dev/null 2>&1 || { echo "$@: no mypy (make deps installs it)"; exit 1; }
	MYPYPATH=$(CURDIR)/python mypy --strict --no-incremental --cache-dir=/dev/null \
	  --python-executable=$(PYTHON) $(CURDIR)/python/tests

# The README's install command, offline, into a fresh virtual environment that sees Debian's
# packages (on Debian 12 the system pip refuses to install outside one: PEP 668); the package
# installs its stubs and py.typed.
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
	  assert fheplan.__file__.startswith("'"$$d"'"); import os; pkg = os.path.dirname(fheplan.__file__); \
	  missing = [f for f in ("py.typed", "__init__.pyi", "_fheplan.pyi") if not os.path.exists(os.path.join(pkg, f))]; \
	  assert not missing, "not installed: %s" % missing; \
	  print("test-python-install: pip install --no-build-isolation ./python works offline, typed (py.typed, stubs)")'
	@rm -rf python/build python/fheplan.egg-info
