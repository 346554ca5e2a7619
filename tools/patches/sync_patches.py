"""Regenerates patches/NNNN-*.patch and patches/series from aten/ and test/.

Usage: python3 tools/patches/sync_patches.py [--root DIR]

New files come byte for byte from aten/ (and test/); the hunks against
existing upstream files come from patches/edits/; patches/files.toml says
which go where. Patch files that are no longer in the series are removed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import patch_series  # noqa: E402


def sync(root: Path) -> list[tuple[str, str]]:
    """Writes the generated files; returns (path, action) for each change."""
    series = patch_series.build_series(root)
    if series.problems:
        raise SystemExit("sync_patches: fix patches/files.toml first:\n  "
                         + "\n  ".join(series.problems))
    wanted = patch_series.expected_outputs(series)
    changes = []
    for rel in patch_series.generated_on_disk(root):
        if rel not in wanted:
            (root / rel).unlink()
            changes.append((rel, "removed"))
    for rel, text in wanted.items():
        path = root / rel
        old = path.read_text() if path.exists() else None
        if old != text:
            path.write_text(text)
            changes.append((rel, "written" if old is None else "updated"))
    return changes


def _print_table(root: Path, changes: list[tuple[str, str]]) -> None:
    series = patch_series.build_series(root)
    print(f"{'patch':<44} {'status':<9} {'files':>5} {'edits':>5}")
    for p in series.patches:
        status = "pending" if p.pending else "in series"
        print(f"{p.spec.filename:<44} {status:<9} {len(p.new_files):>5} "
              f"{len(p.edits):>5}" + (f"  ({p.pending})" if p.pending else ""))
    print(f"{len(changes)} file(s) changed under patches/")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=patch_series.REPO,
                        help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    changes = sync(args.root)
    for rel, action in changes:
        print(f"{action:>8} {rel}")
    _print_table(args.root, changes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
