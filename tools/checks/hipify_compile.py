#!/usr/bin/env python3
"""Builds the series' CUDA folders as a ROCm build of PyTorch would.

    python3 tools/checks/hipify_compile.py   # needs hipcc (HIP 5.2 will do)

PyTorch's ROCm build (tools/amd_build/build_amd.py) hipifies
aten/src/ATen/cuda/* and aten/src/ATen/native/cuda/* into .../hip/* and
compiles every translation unit it gets, so a CUDA-only file must compile
to nothing under USE_ROCM, and a file that ROCm needs must compile. This
runs torch.utils.hipify over every file of the series in those folders
(with the torch wheel's own CUDA headers, hipified the same way, beside
them) into a temporary tree, then, per hipified unit:

  guarded-empty      preprocessed with -DUSE_ROCM, the unit's own code is
                     empty (at most empty namespaces): its guard works;
  compiled           .cpp: compiled with the C++ compiler in hipcc's
                     toolchain, as PyTorch compiles its hip/*.cpp;
                     .hip: compiled host-only with hipcc;
  preprocessed-only  a .hip unit clang 15 (Debian's hipcc) cannot compile
                     against torch >= 2.14's C++20 headers: it crashes in
                     HIP mode on c10/core/CachingDeviceAllocator.h.

It fails when a unit does not preprocess or compile, when any preprocessed
unit still holds CUTLASS code (`cutlass`, `cute::`), or when a kernel that
the series registers for the CUDA dispatch key (which ROCm builds use too)
is in no unit ROCm builds. Headers are checked through the units that
include them. Libraries Debian does not package (hipBLAS, hipSOLVER,
hipSPARSE, rocThrust, HIP >= 5.3) are stood in for by
tools/checks/hip_stubs. Run by tools/checks/check_hip_compile.sh.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import torch
from torch.utils.hipify import hipify_python
from torch.utils.hipify.hipify_python import get_hip_file_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hipify_collisions import _HIPIFIED, REPO, series_files  # noqa: E402

STUBS = REPO / "tools" / "checks" / "hip_stubs"
TORCH_INCLUDE = Path(torch.__file__).parent / "include"
# The wheel's CUDA headers the series' units include; hipified beside them.
_WHEEL_CUDA_DIRS = ("ATen/cuda", "ATen/native/cuda", "c10/cuda")
_CUTLASS = re.compile(r"\bcutlass\b|\bcute::")
# clang 15 dying in HIP mode (a crash, not a diagnostic).
_CLANG_CRASH = re.compile(r"PLEASE submit a bug report|Stack dump:|"
                          r"frontend command failed due to signal")
_LINE_MARKER = re.compile(r'^# \d+ "(.*)"')
_EMPTY_NAMESPACE = re.compile(r"\bnamespace\s+[\w:]*\s*\{\s*\}")


def _hipify_tree(tree: Path) -> None:
    """Copies aten/ and the wheel's CUDA headers into tree and hipifies the
    CUDA folders in place, as build_amd.py does."""
    shutil.copytree(REPO / "aten", tree / "aten")
    for d in _WHEEL_CUDA_DIRS:
        shutil.copytree(TORCH_INCLUDE / d, tree / "include" / d)
    includes = [str(tree / p) for p in (
        "aten/src/ATen/cuda/*", "aten/src/ATen/native/cuda/*",
        *(f"include/{d}/*" for d in _WHEEL_CUDA_DIRS))]
    with open(os.devnull, "w") as quiet, redirect_stdout(quiet), \
            redirect_stderr(quiet):
        hipify_python.hipify(
            project_directory=str(tree), output_directory=str(tree),
            includes=includes, ignores=[str(tree / "*/hip/*")],
            show_progress=False, hip_clang_launch=True)


def _flags(tree: Path) -> list[str]:
    # Our files (-I) with warnings as errors; torch's (-isystem) without.
    return ["-std=c++20", "-DUSE_ROCM", "-Wall", "-Wextra", "-Werror",
            "-I", str(tree / "aten" / "src"),
            "-isystem", str(tree / "include"),
            "-isystem", str(TORCH_INCLUDE),
            "-isystem", str(STUBS),
            "-include", str(STUBS / "hip_runtime_5_3.h")]


def _compiler(unit: Path, tree: Path) -> list[str]:
    if unit.suffix == ".hip":
        # --offload-arch: any, it only stops hipcc probing for a GPU.
        return ["hipcc", "--offload-arch=gfx90a", "--cuda-host-only",
                "-Wno-unused-command-line-argument", *_flags(tree)]
    clang = Path(subprocess.run(
        ["hipconfig", "--hipclangpath"], capture_output=True, text=True,
        check=True).stdout.strip())
    # PyTorch compiles hip/*.cpp with the C++ compiler, not in HIP mode.
    cxx = next((str(c) for c in (clang / "clang++", clang / "clang++-15")
                if c.exists()), "clang++-15")
    return [cxx, "-x", "c++", "-D__HIP_PLATFORM_AMD__=1", *_flags(tree)]


def _own_code(preprocessed: str, unit: Path) -> str:
    """The code that comes from the unit itself, not from its includes."""
    own, keep = [], True
    for line in preprocessed.splitlines():
        marker = _LINE_MARKER.match(line)
        if marker:
            keep = Path(marker.group(1)).name == unit.name
        elif keep:
            own.append(line)
    code = " ".join(own)
    while True:
        stripped = _EMPTY_NAMESPACE.sub(" ", code)
        if stripped == code:
            return code.strip()
        code = stripped


def _check_unit(unit: Path, tree: Path, out: Path) -> tuple[str, str, str]:
    """(status, why, preprocessed own code) of one hipified unit; status
    FAIL carries the compiler's message."""
    cmd = _compiler(unit, tree)
    pre = subprocess.run([*cmd, "-E", str(unit)], capture_output=True,
                         text=True)
    if pre.returncode != 0:
        why = ("includes CUTLASS under USE_ROCM"
               if re.search(r"'cut(lass|e)/\S+' file not found", pre.stderr)
               else "preprocessing failed")
        return "FAIL", f"{why}:\n{pre.stderr[-3000:]}", ""
    hits = sorted({m.group(0) for m in _CUTLASS.finditer(pre.stdout)})
    own = _own_code(pre.stdout, unit)
    if hits:
        return "FAIL", f"CUTLASS under USE_ROCM: {', '.join(hits)}", own
    if not own:
        return "guarded-empty", "", own
    obj = out / (unit.name + ".o")
    comp = subprocess.run([*cmd, "-c", str(unit), "-o", str(obj)],
                          capture_output=True, text=True)
    if comp.returncode == 0:
        return "compiled", "", own
    if unit.suffix == ".hip" and _CLANG_CRASH.search(comp.stderr):
        return ("preprocessed-only",
                "clang 15 crashes in HIP mode on torch's C++20 headers", own)
    return "FAIL", f"compile failed:\n{comp.stderr[-3000:]}", own


def cuda_dispatch_kernels(repo: Path = REPO) -> set[str]:
    """Kernels the series' native_functions.yaml hunks register for the
    CUDA key; a ROCm build registers them too (HIP dispatches as CUDA)."""
    names = set()
    for diff in (repo / "patches" / "edits").glob("*.diff"):
        names |= set(re.findall(r"^\+\s+CUDA(?:, \w+)*: (\w+)\s*$",
                                diff.read_text(), re.M))
    return names


# The folders build_amd.py hipifies into the ROCm library. The series' C++
# tests (aten/src/ATen/test/) are host-only and run on the CPU through
# tools/checks/run_cpp_tests.sh.
_LIBRARY_DIRS = ("aten/src/ATen/cuda/", "aten/src/ATen/native/cuda/")


def main() -> int:
    files = sorted(f for f in series_files() if _HIPIFIED.match(f)
                   and f.startswith(_LIBRARY_DIRS))
    units = [f for f in files if (REPO / f).is_file()
             and f.endswith((".cpp", ".cu"))]
    upstream = [f for f in files if not (REPO / f).exists()]
    with tempfile.TemporaryDirectory(prefix="hipify_compile.") as tmp:
        tree, out = Path(tmp) / "tree", Path(tmp) / "obj"
        out.mkdir()
        _hipify_tree(tree)
        hip_units = {f: tree / get_hip_file_path(f) for f in units}
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = dict(zip(units, pool.map(
                lambda f: _check_unit(hip_units[f], tree, out), units)))
    failed = False
    width = max(len(f) for f in units)
    for f in units:
        status, why, _ = results[f]
        hip = get_hip_file_path(f).rsplit("/", 1)[-1]
        detail = why.splitlines()[0] if why else ""
        print(f"    {f:<{width}}  -> {hip:<34} {status}"
              + (f" ({detail})" if detail and status != "FAIL" else ""))
        if status == "FAIL":
            failed = True
            print("\n".join("      " + line for line in why.splitlines()))
    for f in upstream:
        print(f"    {f:<{width}}  not checked (an upstream file the "
              "series edits; its source is not here)")
    built = " ".join(own for status, _, own in results.values()
                     if status in ("compiled", "preprocessed-only"))
    for kernel in sorted(cuda_dispatch_kernels()):
        if not re.search(rf"\b{kernel}\s*\(", built):
            failed = True
            print(f"hipify_compile: {kernel} (a CUDA dispatch kernel) is "
                  "in no unit a ROCm build compiles")
    counts = {s: sum(r[0] == s for r in results.values())
              for s in ("compiled", "guarded-empty", "preprocessed-only")}
    print(f"hipify_compile: {len(units)} unit(s): "
          + ", ".join(f"{n} {s}" for s, n in counts.items())
          + f"; {len(upstream)} upstream file(s) not here"
          + ("; FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
