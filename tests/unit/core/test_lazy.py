"""A LazyModule imports its module at the first attribute read, not before."""

from __future__ import annotations

import subprocess
import sys

from lakehouse.core.lazy import LazyModule


def test_the_module_is_imported_at_the_first_attribute_read() -> None:
    code = (
        "import sys\n"
        "from lakehouse.core.lazy import LazyModule\n"
        "lazy = LazyModule('colorsys')\n"
        "assert 'colorsys' not in sys.modules\n"
        "assert lazy.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)\n"
        "assert 'colorsys' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_the_suites_leaves_great_expectations_for_the_first_suite_built() -> None:
    """Every test worker imports every test module: the suites' must not cost seconds."""
    code = (
        "import sys\n"
        "import lakehouse.quality.suites\n"
        "assert 'great_expectations' not in sys.modules, 'imported with the suites'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_attribute_is_an_attribute_error() -> None:
    try:
        LazyModule("colorsys").no_such_function  # noqa: B018
    except AttributeError as err:
        assert "no_such_function" in str(err)
    else:
        raise AssertionError("no AttributeError")
