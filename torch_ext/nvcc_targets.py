"""nvcc with each CUDA source's own targets.

torch_ext/setup.py points cpp_extension's ninja build at this script
(PYTORCH_NVCC), so every CUDA file compiles in one ninja run with MAX_JOBS
shared by all of them, yet each gets the -gencode flags of cuda_targets.
(cpp_extension gives one flag list to every .cu file; running one ninja per
target group instead left most cores idle while each group's slowest file
finished, and the groups ran one after another.)

    python3 nvcc_targets.py NVCC-ARGS...     # as ninja calls it

The real compiler is OVERLAP_OPS_REAL_NVCC (shell words, set by setup.py:
the PYTORCH_NVCC the user had, else $CUDA_HOME/bin/nvcc). The arguments
must hold one arch flag, `--overlap-ops-archs=90a,80` (arch_flag), which
setup.py puts among the nvcc flags: the targets then sit in ninja's command
line, so changing them recompiles; the flag keeps cpp_extension from adding
its own -gencode flags; and nvcc rejects it, so a build that bypasses this
script fails at once rather than compiling for the wrong GPUs.

The targets (resolve_archs): OVERLAP_OPS_ARCHS if set (nvcc names such as
"90a;80"), else TORCH_CUDA_ARCH_LIST if set (PyTorch's form, "8.0;9.0+PTX",
with 9.0 meaning sm_90a), else "90a;80".
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from typing import Callable, Mapping

ARCH_FLAG = "--overlap-ops-archs="
DEFAULT_ARCHS = "90a;80"
PTX_80 = "-gencode=arch=compute_80,code=compute_80"

# TORCH_CUDA_ARCH_LIST's names, as torch.utils.cpp_extension expands them.
_NAMED_ARCHS = {
    "Volta+Tegra": "7.2", "Volta": "7.0+PTX", "Turing": "7.5+PTX",
    "Ampere+Tegra": "8.7", "Ampere": "8.0;8.6+PTX", "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX", "Blackwell+Tegra": "11.0",
    "Blackwell": "10.0;10.3;12.0;12.1+PTX", "Rubin": "10.7+PTX",
}
_NVCC_ARCH = re.compile(r"\d{2,3}[af]?(\+PTX)?")
_TORCH_ARCH = re.compile(r"(\d+)\.(\d)([af]?)(\+PTX)?")


def resolve_archs(
    environ: Mapping[str, str] = os.environ,
    visible: Callable[[], list[tuple[int, int]]] = lambda: [],
) -> tuple[list[str], str]:
    """This build's targets, as nvcc names ("90a", "86+PTX"), and where
    they came from. `visible` gives the compute capabilities of the visible
    GPUs, for TORCH_CUDA_ARCH_LIST=native."""
    if environ.get("OVERLAP_OPS_ARCHS", "").strip():
        return _nvcc_archs(environ["OVERLAP_OPS_ARCHS"]), "OVERLAP_OPS_ARCHS"
    torch_list = environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if torch_list:
        return from_torch_arch_list(torch_list, visible), \
            "TORCH_CUDA_ARCH_LIST"
    return _nvcc_archs(DEFAULT_ARCHS), "default"


def _nvcc_archs(value: str) -> list[str]:
    archs = [arch.strip() for arch in value.split(";") if arch.strip()]
    bad = [arch for arch in archs if not _NVCC_ARCH.fullmatch(arch)]
    if bad or not archs:
        raise SystemExit(
            f"overlap_ops: OVERLAP_OPS_ARCHS={value!r}: expected nvcc "
            "targets separated by ';', such as 90a;80 or 90a;86+PTX")
    return archs


def from_torch_arch_list(
    value: str, visible: Callable[[], list[tuple[int, int]]] = lambda: [],
) -> list[str]:
    """TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX", "8.0 9.0", "Hopper", "native")
    as nvcc names (["80", "90a+PTX"]). 9.0 becomes 90a: the Hopper kernels
    use WGMMA and TMA, which only sm_90a has."""
    if value == "native":
        value = _native_list(visible())
    for name, archs in _NAMED_ARCHS.items():
        value = value.replace(name, archs)
    entries = [e for e in value.replace(" ", ";").split(";") if e]
    return list(dict.fromkeys(_from_torch_arch(e) for e in entries))


def _native_list(capabilities: list[tuple[int, int]]) -> str:
    if not capabilities:
        raise SystemExit(
            "overlap_ops: TORCH_CUDA_ARCH_LIST=native, but no GPU is "
            "visible: name the targets, e.g. TORCH_CUDA_ARCH_LIST=9.0")
    listed = sorted(set(capabilities))
    return ";".join(f"{major}.{minor}" for major, minor in listed) + "+PTX"


def _from_torch_arch(entry: str) -> str:
    found = _TORCH_ARCH.fullmatch(entry)
    if not found:
        raise SystemExit(
            f"overlap_ops: TORCH_CUDA_ARCH_LIST has {entry!r}: expected "
            "entries such as 8.0, 9.0, 10.0a or 9.0+PTX, or a name such as "
            "Hopper, separated by ';' or spaces")
    major, minor, suffix, ptx = found.groups()
    if (major, minor) == ("9", "0"):
        suffix = "a"
    return f"{major}{minor}{suffix}{ptx or ''}"


def arch_flag(archs: list[str]) -> str:
    """The flag setup.py puts among the nvcc flags for this script."""
    return ARCH_FLAG + ",".join(archs)


def _code(arch: str) -> str:
    return arch.removesuffix("+PTX")


def _sass(codes: list[str]) -> list[str]:
    return [f"-gencode=arch=compute_{c},code=sm_{c}"
            for c in dict.fromkeys(codes)]


def _ptx(archs: list[str]) -> list[str]:
    # PTX is for GPUs newer than every target, so it is never the
    # arch-specific kind (compute_90a PTX only runs on SM90).
    generic = [_code(a).rstrip("af") for a in archs
               if a.endswith("+PTX") or _code(a) == "80"]
    return [f"-gencode=arch=compute_{c},code=compute_{c}"
            for c in dict.fromkeys(generic)]


def cuda_targets(name: str, archs: list[str]) -> list[str]:
    """nvcc -gencode flags for the CUDA source file `name` (a base name),
    for the build's targets `archs` (resolve_archs).

    - GroupedMMSm90_*.cu (CUTLASS 3.x, WGMMA/TMA): Hopper SASS only. They
      compile to empty bodies anywhere else, and only SM90 launches them,
      where GroupedMMSm90_probe.cu (built alike) says their sm_90a code is
      there.
    - GroupedMMSm80_*.cu (CUTLASS 2.x, mma.sync): SASS for every target but
      Hopper, plus compute_80 PTX. Without Hopper SASS in their image, an
      H200 runs these kernels from the PTX through the driver's JIT, as a
      GPU newer than every SASS target (SM120 without sm_120) does; the
      forced SM80 path on the H200 therefore tests that PTX. The TF32 one
      (GroupedMMSm80_tf32.cu) also gets Hopper SASS: Hopper runs it by
      default for some float32 calls (GroupedMMTf32Route.h), so no JIT.
    - everything else: every target, plus PTX for 80 and each +PTX target.
    """
    codes = [_code(a) for a in archs]
    if name.startswith("GroupedMMSm90_"):
        return _sass([c for c in codes if c.startswith("9")] or codes)
    if name == "GroupedMMSm80_tf32.cu":
        return _sass(codes) + [PTX_80]
    if name.startswith("GroupedMMSm80_"):
        return _sass([c for c in codes if not c.startswith("9")]) + [PTX_80]
    return _sass(codes) + _ptx(archs)


def nvcc_command(args: list[str], real_nvcc: str) -> list[str]:
    """The real nvcc's command for ninja's arguments `args`."""
    sources = [arg for arg in args if arg.endswith(".cu")]
    flags = [arg for arg in args if arg.startswith(ARCH_FLAG)]
    if len(flags) != 1 or len(sources) != 1:
        raise SystemExit(
            f"nvcc_targets: expected one {ARCH_FLAG}... flag and one .cu "
            f"source among the arguments, got {len(flags)} flag(s) and "
            f"{len(sources)} source(s): {shlex.join(args)}")
    archs = flags[0].removeprefix(ARCH_FLAG).split(",")
    kept = [arg for arg in args if arg != flags[0]]
    return shlex.split(real_nvcc) + kept + cuda_targets(
        os.path.basename(sources[0]), archs)


def main() -> None:
    real_nvcc = os.environ.get("OVERLAP_OPS_REAL_NVCC")
    if not real_nvcc:
        raise SystemExit("nvcc_targets: OVERLAP_OPS_REAL_NVCC is not set "
                         "(torch_ext/setup.py sets it)")
    command = nvcc_command(sys.argv[1:], real_nvcc)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
