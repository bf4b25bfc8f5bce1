"""Builds the fheplan extension module offline: `pip install --no-build-isolation ./python`
from the repository root (Debian: python3-dev, python3-setuptools). The C library is built
by the repository's make (`make python-flags` builds libfheplan.a and prints what to link)."""

import glob
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def library():
    out = subprocess.run(["make", "-C", REPO, "--no-print-directory", "-s", "python-flags"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout.split("\n")
    lines = [ln for ln in out if ln.strip()]
    static, libs = lines[-2].strip(), shlex.split(lines[-1])
    return static, [f[2:] for f in libs if f.startswith("-l")], \
        [f[2:] for f in libs if f.startswith("-L")], \
        [f for f in libs if not f.startswith(("-l", "-L"))]


STATIC, LIBS, LIBDIRS, OTHER = library()
os.chdir(HERE)
setup(
    name="fheplan",
    version=open(os.path.join(REPO, "include", "fheplan", "version.h")).read()
    .split('FHEPLAN_VERSION "')[1].split('"')[0],
    description="Residency manager for FHE values: the Python binding of libfheplan",
    packages=["fheplan"],
    package_data={"fheplan": ["py.typed", "*.pyi"]},  # typed package (PEP 561): the stubs
    ext_modules=[
        Extension(
            "fheplan._fheplan",
            sources=sorted(glob.glob("src/*.c")),
            include_dirs=[os.path.join(REPO, "include"), "src"],
            define_macros=[("_GNU_SOURCE", None)],
            extra_compile_args=["-std=c11", "-Wno-missing-field-initializers"],
            extra_objects=[STATIC],
            libraries=LIBS,
            library_dirs=LIBDIRS,
            extra_link_args=OTHER,
            depends=sorted(glob.glob("src/*.h")),
        )
    ],
    python_requires=">=3.9",
)
