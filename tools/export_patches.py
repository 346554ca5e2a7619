"""Exports the series for upstream review: an mbox, or one branch per patch.

Usage:
  python3 tools/export_patches.py                       # dist/patches/*.mbox + PR texts
  python3 tools/export_patches.py --branches --pytorch-src DIR

Every patch gets a PR description (dist/patches/NNNN-slug.md): motivation,
what changed (files and line counts), test plan, and measured numbers taken
from results/ files matching the patch's `results` patterns in
patches/files.toml ("no measurements yet" when there are none). With
--branches, DIR gets branches overlap/NNNN-slug, each stacked on the previous
one from the pinned commit, ready to push and open as PRs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import patch_series  # noqa: E402
from patch_series import BuiltPatch, Series  # noqa: E402

_MAX_RESULT_LINES = 20


def _result_files(root: Path, patch: BuiltPatch) -> list[Path]:
    results = root / "results"
    found: set[Path] = set()
    for pattern in patch.spec.results:
        found.update(p for p in results.rglob(pattern) if p.is_file())
    return sorted(found)


def _summarise_json(data: object) -> list[str]:
    if isinstance(data, dict):
        for key in ("summary", "geomean", "table"):
            if key in data:
                return _summarise_json(data[key])
        return [f"| {k} | {v} |" for k, v in data.items()
                if isinstance(v, (int, float, str, bool))][:_MAX_RESULT_LINES]
    if isinstance(data, list):
        return [f"- {json.dumps(item)[:160]}" for item in data[:_MAX_RESULT_LINES]]
    return [str(data)]


def measurements(root: Path, patch: BuiltPatch) -> str:
    """Markdown for the measured numbers of one patch, from results/."""
    files = _result_files(root, patch)
    if not files:
        return "No measurements yet.\n"
    parts = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".json":
            try:
                lines = _summarise_json(json.loads(path.read_text()))
            except ValueError as exc:
                lines = [f"(unreadable JSON: {exc})"]
        elif path.suffix in (".md", ".txt", ".csv"):
            lines = path.read_text().splitlines()[:_MAX_RESULT_LINES]
        else:
            continue
        parts.append(f"From `{rel}`:\n\n" + "\n".join(lines) + "\n")
    return "\n".join(parts) if parts else "No measurements yet.\n"


def pr_description(root: Path, series: Series, patch: BuiltPatch) -> str:
    """The PR text of one patch, in Markdown."""
    spec = patch.spec
    changed = "\n".join(
        f"- `{d.path}`: {'new, ' if d.new_file else ''}+{d.added} -{d.removed}"
        for d in patch.file_diffs)
    return (f"# {spec.subject}\n\n"
            f"Base: PyTorch {series.upstream.tag} ({series.upstream.commit[:12]}),"
            f" patch {spec.filename}.\n\n"
            f"## Motivation\n\n{spec.motivation or '(none given)'}\n\n"
            f"## What changed\n\n{changed}\n\n"
            f"## Test plan\n\n{spec.test_plan or '(none given)'}\n\n"
            f"## Measurements\n\n{measurements(root, patch)}")


def write_mbox(root: Path, series: Series, out: Path) -> Path:
    """One mbox with [PATCH n/N] subjects, ready for ``git am``."""
    total = len(series.emitted)
    text = "".join(
        patch_series.render_patch(series, patch, f"[PATCH {i}/{total}]")
        for i, patch in enumerate(series.emitted, 1))
    path = out / f"overlap-ops-{series.upstream.tag}.mbox"
    path.write_text(text)
    return path


def _git(src: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=src, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"export_patches: git {' '.join(args)}: "
                         f"{done.stderr.strip()}")
    return done.stdout.strip()


def write_branches(root: Path, series: Series, src: Path) -> list[str]:
    """Creates overlap/NNNN-slug branches in src, stacked from the pin."""
    identity = ["-c", "user.name=overlap-ops export",
                "-c", "user.email=export@overlap-ops.invalid"]
    start = _git(src, "rev-parse", "--abbrev-ref", "HEAD")
    _git(src, "checkout", "--quiet", "--detach", series.upstream.commit)
    branches = []
    try:
        for patch in series.emitted:
            _git(src, *identity, "am", "--quiet",
                 str(root / "patches" / patch.spec.filename))
            name = f"overlap/{patch.spec.filename[:-len('.patch')]}"
            _git(src, "branch", "--force", name)
            branches.append(name)
    finally:
        subprocess.run(["git", "am", "--abort"], cwd=src, capture_output=True,
                       check=False)
        if start != "HEAD":
            _git(src, "checkout", "--quiet", start)
    return branches


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: dist/patches)")
    parser.add_argument("--branches", action="store_true",
                        help="also create one branch per patch in --pytorch-src")
    parser.add_argument("--pytorch-src", type=Path,
                        help="PyTorch checkout that has the pinned commit")
    parser.add_argument("--root", type=Path, default=patch_series.REPO)
    args = parser.parse_args(argv)
    if args.branches and args.pytorch_src is None:
        parser.error("--branches needs --pytorch-src DIR")
    root = args.root.resolve()
    series = patch_series.build_series(root)
    out = args.out or root / "dist" / "patches"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for patch in series.emitted:
        md = out / patch.spec.filename.replace(".patch", ".md")
        md.write_text(pr_description(root, series, patch))
        has_numbers = "No measurements yet" not in md.read_text()
        rows.append((patch.spec.filename, md.name,
                     "yes" if has_numbers else "none yet"))
    mbox = write_mbox(root, series, out)
    branches = write_branches(root, series, args.pytorch_src) if args.branches else []
    for name in branches:
        print(f"branch {name}")
    print(f"mbox   {mbox}")
    print(f"\n{'patch':<44} {'description':<40} measurements")
    for name, md, numbers in rows:
        print(f"{name:<44} {md:<40} {numbers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
