"""Setup of the kiln Python package tests (CTest test `python`, tests/CMakeLists.txt).

CTest runs `python3 -m pytest tests/python` with PYTHONPATH at the build tree's python/ folder.
When the extension module was not built there (no pybind11 or python3-dev, KILN_BUILD_PYTHON=OFF,
or a build of selected targets such as the sanitizer builds), the run exits 77, which CTest
reports as skipped, after saying why on stderr: never a silent pass.
"""
import glob
import os
import sys

import pytest


def _skip_all(why):
    sys.stderr.write(f"\nSKIPPED: the kiln Python tests did not run: {why}\n")
    pytest.exit(f"SKIPPED: {why}", returncode=77)


def pytest_configure(config):
    built = os.environ.get("KILN_PYTHON_DIR")
    if built and not glob.glob(os.path.join(built, "kiln", "_kiln*.so")):
        _skip_all(f"the extension module was not built in {built}/kiln (see the CMake warning "
                  "about KILN_BUILD_PYTHON, or build the kiln_python target)")
    try:
        import numpy  # noqa: F401
    except ImportError:
        _skip_all(f"{sys.executable} has no numpy (apt-get install python3-numpy)")

