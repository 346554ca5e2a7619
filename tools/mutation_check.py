#!/usr/bin/env python3
"""Proves that the CPU suite catches small real bugs: applies each mutant
(one small edit of the sources), rebuilds the CPU extension in place where
the edit is in C++, runs the tests that should catch it, and reports which
mutants survived. Where the patch series tests the edited code with C++
tests (aten/src/ATen/test/, run by tools/checks/run_cpp_tests.sh), those
must fail too.

    python3 tools/mutation_check.py            # every mutant
    python3 tools/mutation_check.py --ci       # the subset CI runs
    python3 tools/mutation_check.py --list     # the mutants, nothing run
    python3 tools/mutation_check.py --only ID  # one mutant (repeatable)

It edits the checkout itself and restores every file afterwards, also on
Ctrl-C, then rebuilds once more so the extension matches the sources. The
first build is a full CPU-only build of torch_ext (a few minutes on 2
cores); each C++ mutant then recompiles only what includes the edited file.
Exit status 0 only when every mutant run was killed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXT = REPO / "torch_ext"


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository
    old: str   # must occur exactly once
    new: str
    tests: tuple[str, ...]  # pytest arguments that must fail
    ci: bool = True
    # C++ tests of the series (run_cpp_tests.sh names) that must fail too.
    cpp_tests: tuple[str, ...] = ()

    @property
    def needs_build(self) -> bool:
        return self.path.startswith("aten/") or self.path.startswith(
            "torch_ext/csrc/")


_VALIDATION = "aten/src/ATen/native/GroupedMMValidation.cpp"
_T_GROUPED = "test/test_grouped_mm.py"
_T_VALIDATION = "test/test_grouped_mm_validation.py"
_T_AUTOGRAD = "test/test_grouped_mm_autograd.py"
_T_CU_MASK = "test/test_extension_cu_mask.py"
_T_CARVEOUT = "test/test_extension_carveout.py"
_CPP_CARVEOUT = "cuda_sm_carveout_test"
_CPP_CU_MASK = "cuda_cu_mask_test"
_CPP_STREAM_CACHE = "cuda_carveout_stream_cache_test"

MUTANTS: tuple[Mutant, ...] = (
    # Validation: the host checks that keep the kernels in bounds.
    Mutant("validation-contraction-2d3d", _VALIDATION,
           "      check_inner_dims(self.size(1), mat2.size(1), p.layout, "
           "self, mat2);\n",
           "", (_T_VALIDATION,),
           ci=False),
    Mutant("validation-contraction-3d2d", _VALIDATION,
           "      check_inner_dims(self.size(2), mat2.size(0), p.layout, "
           "self, mat2);\n",
           "", (_T_VALIDATION,)),
    Mutant("validation-contraction-2d2d", _VALIDATION,
           "      check_inner_dims(self.size(1), mat2.size(0), p.layout, "
           "self, mat2);\n",
           "", (_T_VALIDATION,),
           ci=False),
    Mutant("validation-contraction-3d3d", _VALIDATION,
           "      check_inner_dims(self.size(2), mat2.size(1), p.layout, "
           "self, mat2);\n",
           "", (_T_VALIDATION,),
           ci=False),
    Mutant("validation-batch-3d3d", _VALIDATION,
           "          self.size(0) == mat2.size(0),",
           "          self.size(0) >= mat2.size(0),",
           (_T_VALIDATION,),
           ci=False),
    Mutant("validation-offs-length", _VALIDATION,
           "        o.size(0) == expected_groups,",
           "        o.size(0) >= expected_groups,",
           (_T_VALIDATION,)),
    Mutant("validation-offs-rank", _VALIDATION,
           "      o.dim() == 1,",
           "      o.dim() >= 1,",
           (_T_VALIDATION,),
           ci=False),
    Mutant("validation-bias-shape", _VALIDATION,
           "      b.dim() == 2 && b.size(0) == p.num_groups && "
           "b.size(1) == p.n,",
           "      b.dim() == 2 && b.size(1) == p.n,",
           (_T_VALIDATION,),
           ci=False),
    Mutant("validation-out-dtype", _VALIDATION,
           "      *out_dtype == kFloat && low_precision,",
           "      *out_dtype == kFloat,",
           (_T_VALIDATION,),
           ci=False),
    Mutant("checked-offsets-decreasing", _VALIDATION,
           "        v[g] >= prev,",
           "        true,",
           (_T_VALIDATION,),
           ci=False),
    # The carveout policy and the ROCm CU mask.
    Mutant("carveout-upper-bound", "aten/src/ATen/cuda/SMCarveout.cpp",
           "      carveout >= 0 && carveout < total_sms,",
           "      carveout >= 0 && carveout <= total_sms,",
           (_T_CARVEOUT,), cpp_tests=(_CPP_CARVEOUT,)),
    Mutant("cu-mask-tail-word", "aten/src/ATen/cuda/CUMask.cpp",
           "    mask[full_words] = (uint32_t{1} << tail_bits) - 1u;",
           "    mask[full_words] = (uint32_t{1} << tail_bits);",
           (_T_CU_MASK,), cpp_tests=(_CPP_CU_MASK,)),
    Mutant("cu-mask-xcc-rounds", "aten/src/ATen/cuda/CUMask.cpp",
           "  const int64_t rounds_free = (carveout + num_xcc - 1) / num_xcc;",
           "  const int64_t rounds_free = carveout / num_xcc;",
           (_T_CU_MASK,), ci=False, cpp_tests=(_CPP_CU_MASK,)),
    # The restricted-stream cache: a stream shared by two caller streams
    # orders each one after the other's work.
    Mutant("stream-cache-shared-by-callers",
           "aten/src/ATen/cuda/CarveoutStreamCache.cpp",
           "      caller == other.caller;", "      true;",
           (_T_CARVEOUT, "-k", "cache or caller"), ci=False,
           cpp_tests=(_CPP_STREAM_CACHE,)),
    # The CPU reference kernel.
    Mutant("cpu-bias-2d2d", "aten/src/ATen/native/GroupedMM.cpp",
           "        add_bias_if_any(group_out, bias_row(bias, g, acc_dtype));",
           "        if (r.size() > 0) {\n"
           "          add_bias_if_any(group_out, bias_row(bias, g, "
           "acc_dtype));\n        }",
           (_T_GROUPED, "-k", "bias"),
           ci=False),
    Mutant("cpu-out-dtype-rounding", "aten/src/ATen/native/GroupedMM.cpp",
           "  return acc.to(p.out_dtype);",
           "  return acc.to(p.input_dtype).to(p.out_dtype);",
           (_T_GROUPED, "-k", "out_dtype")),
    # The backward formulas.
    Mutant("backward-column-major-mat2",
           "aten/src/ATen/native/GroupedMMBackward.cpp",
           "    grad_mat2 = is_column_major(mat2_geometry)",
           "    grad_mat2 = false",
           (_T_AUTOGRAD, "-k", "layout"),
           ci=False),
    Mutant("backward-batched-bias", "aten/src/ATen/native/GroupedMMBackward.cpp",
           "  return grad.sum(1, /*keepdim=*/false, sums_dtype(grad));",
           "  return grad.sum(2, /*keepdim=*/false, sums_dtype(grad));",
           (_T_AUTOGRAD, "-k", "backward")),
    # Fake kernels: the shapes torch.compile traces with.
    Mutant("fake-2d2d-shape", "torch_ext/overlap_ops/_fake.py",
           "return (offs.shape[0], a.shape[0], b.shape[1])",
           "return (offs.shape[0], b.shape[1], a.shape[0])",
           (_T_AUTOGRAD, "-k", "opcheck or compile")),
    # The MoE building blocks.
    Mutant("moe-permute-unstable", "torch_ext/overlap_ops/moe.py",
           "order = flat.argsort(stable=True)",
           "order = flat.argsort(descending=True)",
           ("test/test_moe.py",)),
    Mutant("moe-combine-weights", "torch_ext/overlap_ops/moe.py",
           'torch.einsum("tkd,tk->td", per_slot.float(), top_p)',
           'torch.einsum("tkd,tk->td", per_slot.float(), top_p.flip(-1))',
           ("test/test_moe.py",)),
    Mutant("moe-combine-low-precision", "torch_ext/overlap_ops/moe.py",
           'torch.einsum("tkd,tk->td", per_slot.float(), top_p)',
           'torch.einsum("tkd,tk->td", per_slot, top_p.to(y.dtype))',
           ("test/test_moe.py", "-k", "combine"), ci=False),
    Mutant("moe-align-dropped", "torch_ext/overlap_ops/moe.py",
           "perm = permute(top_e, self.num_experts, self.align)",
           "perm = permute(top_e, self.num_experts)",
           ("test/test_moe.py", "-k", "align"), ci=False),
    Mutant("moe-init-fan-out", "torch_ext/overlap_ops/moe.py",
           "torch.nn.init.normal_(w, std=w.shape[-1] ** -0.5)",
           "torch.nn.init.normal_(w, std=w.shape[-2] ** -0.5)",
           ("test/test_moe.py", "-k", "fan_in"), ci=False),
    Mutant("routing-block-exit-fifo", "torch_ext/overlap_ops/routing.py",
           "route_torch_grouped_mm(self._previous.pop())",
           "route_torch_grouped_mm(self._previous.pop(0))",
           ("test/test_extension_grouped_mm.py", "-k", "nests"), ci=False),
    Mutant("checked-setter-traced", "torch_ext/overlap_ops/checked.py",
           "@torch.compiler.disable\ndef set_checked_offsets",
           "def set_checked_offsets",
           ("test/test_extension_grouped_mm.py", "-k", "compiled"),
           ci=False),
    Mutant("checked-block-no-restore-on-error",
           "torch_ext/overlap_ops/checked.py",
           "        set_checked_offsets(self._previous.pop())",
           "        prev = self._previous.pop()\n"
           "        if exc_info[0] is None:\n"
           "            set_checked_offsets(prev)",
           ("test/test_extension_grouped_mm.py", "-k", "reraise"),
           ci=False),
    Mutant("nccl-min-ctas-kept", "torch_ext/overlap_ops/carveout.py",
           "config.min_ctas = min(config.min_ctas, k) if config.min_ctas > 0 else 1",
           "config.min_ctas = config.min_ctas if config.min_ctas > 0 else 1",
           ("test/test_nccl_carveout.py",), ci=False),
    Mutant("grouped-mm-drops-out-dtype", "torch_ext/overlap_ops/grouped_mm.py",
           "grouped_mm(a, b, offs, bias, out_dtype)",
           "grouped_mm(a, b, offs, bias, None)",
           ("test/test_extension_grouped_mm.py", "-k", "python_entry"),
           ci=False),
    Mutant("gmm-trans-b", "torch_ext/overlap_ops/grouped_mm.py",
           "b.transpose(-2, -1) if trans_b else b",
           "b if trans_b else b",
           ("test/test_gmm.py",)),
    # Routing: the routed call (torch._grouped_mm, which the series' tests
    # call in extension mode) must train with the op's formulas.
    Mutant("routing-no-autograd", "torch_ext/csrc/Register.cpp",
           '  libs.push_back(AtenOverride::aten_impl('
           'c10::DispatchKey::Autograd));\n'
           '  libs.back()->impl("_grouped_mm", '
           'TORCH_FN(aten_grouped_mm_autograd));\n',
           "", (_T_AUTOGRAD, "-k", "backward"),
           ci=False),
    # The dispatch rule between upstream's kernel and ours.
    Mutant("dispatch-rule-bias", "aten/src/ATen/native/GroupedMMDispatchRule.h",
           "if (f.has_bias || !f.offs_int32 || !f.aligned ||",
           "if (!f.offs_int32 || !f.aligned ||",
           ("test/test_grouped_mm_dispatch_rule.py",)),
    Mutant("dispatch-rule-groups",
           "aten/src/ATen/native/GroupedMMDispatchRule.h",
           "f.groups > kUpstreamMaxGroups", "f.groups >= kUpstreamMaxGroups",
           ("test/test_grouped_mm_dispatch_rule.py",),
           ci=False),
    Mutant("dispatch-rule-hopper",
           "aten/src/ATen/native/GroupedMMDispatchRule.h",
           "return sm_major == 8 || (sm_major == 9 && sm_minor == 0) ||",
           "return sm_major == 8 ||",
           ("test/test_grouped_mm_dispatch_rule.py",),
           ci=False),
)


def _run(cmd: list[str], env: dict[str, str] | None = None,
         quiet: bool = True) -> int:
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=REPO, env=env, stdout=out,
                          stderr=out).returncode


def _build() -> None:
    env = dict(os.environ, OVERLAP_OPS_CUDA="0")
    code = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=EXT, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    if code.returncode != 0:
        raise RuntimeError(f"build failed:\n{code.stderr[-3000:]}")


def _tests_fail(mutant: Mutant) -> bool:
    env = dict(os.environ, PYTHONPATH=str(EXT) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p",
           "no:cacheprovider", *mutant.tests]
    code = _run(cmd, env)
    if code == 5:  # pytest: no test collected, which proves nothing
        raise RuntimeError(f"{mutant.name}: {mutant.tests} select no test")
    return code != 0


def _cpp_tests_fail(mutant: Mutant) -> bool:
    env = dict(os.environ, PYTHON=sys.executable)
    cmd = [str(REPO / "tools/checks/run_cpp_tests.sh"), *mutant.cpp_tests]
    return _run(cmd, env) != 0


def _apply(mutant: Mutant) -> str:
    path = REPO / mutant.path
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"{mutant.name}: the text to mutate occurs {count} "
                         f"times in {mutant.path} (must be once)")
    path.write_text(text.replace(mutant.old, mutant.new))
    return text


def run(mutants: list[Mutant]) -> list[tuple[Mutant, str, float]]:
    """(mutant, 'killed' | 'SURVIVED' | 'build error', seconds) each."""
    results = []
    print("mutation_check: building the CPU extension in place ...",
          file=sys.stderr, flush=True)
    _build()
    for mutant in mutants:
        start = time.monotonic()
        original = _apply(mutant)
        try:
            verdict = "killed"
            if mutant.needs_build:
                try:
                    _build()
                except RuntimeError:
                    verdict = "killed (does not build)"
            if verdict == "killed" and not _tests_fail(mutant):
                verdict = "SURVIVED"
            if (verdict == "killed" and mutant.cpp_tests
                    and not _cpp_tests_fail(mutant)):
                verdict = "SURVIVED (C++ tests)"
        finally:
            (REPO / mutant.path).write_text(original)
        seconds = time.monotonic() - start
        results.append((mutant, verdict, seconds))
        print(f"mutation_check: {mutant.name}: {verdict} ({seconds:.0f} s)",
              file=sys.stderr, flush=True)
    if any(m.needs_build for m in mutants):
        _build()  # the extension matches the sources again
    return results


def _table(results: list[tuple[Mutant, str, float]]) -> str:
    lines = ["| mutant | file | verdict | s |", "|---|---|---|---:|"]
    for mutant, verdict, seconds in results:
        lines.append(f"| {mutant.name} | {mutant.path} | {verdict} | "
                     f"{seconds:.0f} |")
    killed = sum(not v.startswith("SURVIVED") for _, v, _ in results)
    lines.append("")
    lines.append(f"killed {killed} of {len(results)} mutants")
    return "\n".join(lines)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true",
                        help="only the mutants marked for CI")
    parser.add_argument("--only", action="append", default=[],
                        metavar="NAME", help="run this mutant (repeatable)")
    parser.add_argument("--list", action="store_true",
                        help="list the mutants and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    chosen = [m for m in MUTANTS if (not args.ci or m.ci)
              and (not args.only or m.name in args.only)]
    unknown = set(args.only) - {m.name for m in MUTANTS}
    if unknown:
        print(f"mutation_check: unknown mutants: {sorted(unknown)}",
              file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.name:32} {m.path}")
        return 0
    for m in chosen:  # every mutant must still apply to the sources
        text = (REPO / m.path).read_text()
        if text.count(m.old) != 1:
            print(f"mutation_check: {m.name} no longer applies to {m.path}",
                  file=sys.stderr)
            return 2
    results = run(chosen)
    print(_table(results))
    return 0 if all(not v.startswith("SURVIVED") for _, v, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
