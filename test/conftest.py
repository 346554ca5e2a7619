"""pytest runs the suite in extension mode when overlap_ops is installed:
torch._grouped_mm and the aten GEMMs answer as in the patched wheel
(test/extension_mode.py says what changes). Not part of the patch series."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extension_mode  # noqa: E402

extension_mode.activate()


@pytest.fixture(autouse=True)
def _extension_mode() -> None:
    """Each test starts in extension mode, whatever a tool an earlier test
    ran left behind."""
    extension_mode.activate()


# A GPU machine whose extension lacks its CUDA kernels (nvcc missing at
# build time) would skip every CUDA test and look green: that is an error
# unless this variable says the skips are wanted.
_ALLOW_CPU_ONLY_BUILD = "GROUPED_MM_TEST_ALLOW_CPU_ONLY_BUILD"


def pytest_collection_modifyitems(config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    reason = extension_mode.cuda_tests_skip_reason()
    if reason is None:
        return
    if os.environ.get("GROUPED_MM_TEST_ALLOW_CPU_ONLY_BUILD") != "1":
        raise pytest.UsageError(
            f"{reason}, but this machine has a GPU: rebuild it with nvcc "
            f"(./build.sh), or set {_ALLOW_CPU_ONLY_BUILD}=1 to skip the "
            "CUDA tests")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if getattr(getattr(item, "cls", None), "device_type", None) == "cuda":
            item.add_marker(skip)
