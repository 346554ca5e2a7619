#!/usr/bin/env python3
"""Fails when PyTorch's ROCm build would overwrite a file of the series.

    python3 tools/checks/hipify_collisions.py

tools/amd_build/build_amd.py hipifies the CUDA folders of ATen and its
C++ tests into their HIP names (cuda/FooCUDA.cpp -> hip/FooHIP.cpp) and
writes over whatever is there. A hand-written ROCm file that a CUDA file maps onto is lost in a
ROCm build. This runs torch's own mapping (torch.utils.hipify) over every
file under aten/ and every upstream file the series edits. Run by CI.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from torch.utils.hipify.hipify_python import get_hip_file_path

REPO = Path(__file__).resolve().parents[2]
# The folders build_amd.py hipifies (ATen's CUDA code and its C++ tests:
# test/cuda_x_test.cpp -> test/hip/hip_x_test.cpp).
_HIPIFIED = re.compile(r"^aten/src/ATen/(?:(?:.*/)?cuda/|test/)")


def series_files(repo: Path = REPO) -> set[str]:
    """Paths (as in the PyTorch tree) the series adds or edits."""
    files = {p.relative_to(repo / "aten").as_posix()
             for p in (repo / "aten").rglob("*") if p.is_file()}
    files = {"aten/" + f for f in files}
    for diff in (repo / "patches" / "edits").glob("*.diff"):
        files |= set(re.findall(r"^\+\+\+ b/(\S+)", diff.read_text(), re.M))
    return files


def collisions(files: set[str]) -> list[str]:
    """One line per HIP path that two files would take, or that a CUDA
    file would write over a file of the series."""
    targets: dict[str, list[str]] = defaultdict(list)
    for path in sorted(files):
        if _HIPIFIED.match(path):
            hip = get_hip_file_path(path, is_pytorch_extension=False)
            if hip != path:
                targets[hip].append(path)
    problems = []
    for hip, sources in sorted(targets.items()):
        if hip in files:
            problems.append(f"{', '.join(sources)} -> {hip}, which the "
                            "series writes by hand")
        elif len(sources) > 1:
            problems.append(f"{', '.join(sources)} all -> {hip}")
    return problems


def main() -> int:
    files = series_files()
    problems = collisions(files)
    for line in problems:
        print(f"hipify collision: {line}")
    print(f"hipify_collisions: {len(files)} files checked, "
          f"{len(problems)} collision(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
