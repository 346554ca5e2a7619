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
must hold ARCH_MARKER, which setup.py puts among the nvcc flags (it also
keeps cpp_extension from adding default -gencode flags) and which nvcc
itself rejects, so a build that bypasses this script fails at once rather
than compiling for the wrong GPUs.
"""

from __future__ import annotations

import os
import shlex
import sys

ARCH_MARKER = "--overlap-ops-arch-flags-per-file"
PTX_80 = "-gencode=arch=compute_80,code=compute_80"


def archs() -> list[str]:
    """OVERLAP_OPS_ARCHS (default "90a;80")."""
    listed = os.environ.get("OVERLAP_OPS_ARCHS", "90a;80").split(";")
    return [arch.strip() for arch in listed if arch.strip()]


def _sass(targets: list[str]) -> list[str]:
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in targets]


def cuda_targets(name: str) -> list[str]:
    """nvcc -gencode flags for the CUDA source file `name` (a base name).

    - GroupedMMSm90_*.cu (CUTLASS 3.x, WGMMA/TMA): Hopper targets only. They
      compile to empty bodies anywhere else, and only SM90 launches them.
    - GroupedMMSm80_*.cu (CUTLASS 2.x, mma.sync): SASS for every target but
      Hopper, plus compute_80 PTX. Without Hopper SASS in their image, an
      H200 runs these kernels from the PTX through the driver's JIT, as a
      GPU newer than every SASS target (SM120 without sm_120) does; the
      forced SM80 path on the H200 therefore tests that PTX. The TF32 one
      (GroupedMMSm80_tf32.cu) also gets Hopper SASS: Hopper runs it by
      default for some float32 calls (GroupedMMTf32Route.h), so no JIT.
    - everything else: every target, plus compute_80 PTX when 80 is listed.
    """
    targets = archs()
    if name.startswith("GroupedMMSm90_"):
        return _sass([a for a in targets if a.startswith("9")] or targets)
    if name == "GroupedMMSm80_tf32.cu":
        return _sass(targets) + [PTX_80]
    if name.startswith("GroupedMMSm80_"):
        return _sass([a for a in targets if not a.startswith("9")]) + [PTX_80]
    return _sass(targets) + ([PTX_80] if "80" in targets else [])


def nvcc_command(args: list[str], real_nvcc: str) -> list[str]:
    """The real nvcc's command for ninja's arguments `args`."""
    sources = [arg for arg in args if arg.endswith(".cu")]
    if ARCH_MARKER not in args or len(sources) != 1:
        raise SystemExit(
            f"nvcc_targets: expected {ARCH_MARKER} and one .cu source among "
            f"the arguments, got {len(sources)} source(s): {shlex.join(args)}")
    kept = [arg for arg in args if arg != ARCH_MARKER]
    return shlex.split(real_nvcc) + kept + cuda_targets(
        os.path.basename(sources[0]))


def main() -> None:
    real_nvcc = os.environ.get("OVERLAP_OPS_REAL_NVCC")
    if not real_nvcc:
        raise SystemExit("nvcc_targets: OVERLAP_OPS_REAL_NVCC is not set "
                         "(torch_ext/setup.py sets it)")
    command = nvcc_command(sys.argv[1:], real_nvcc)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
