#!/usr/bin/env python3
"""Lists every TORCH_CHECK of _grouped_mm's shared validation and the test
that triggers it; fails when one has none.

    python3 tools/checks/validation_coverage.py

A check counts as tested when the longest literal piece of its message
appears in test/test_grouped_mm_validation.py, which asserts whole
messages. Run by CI.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "aten/src/ATen/native/GroupedMMValidation.cpp"
TESTS = REPO / "test/test_grouped_mm_validation.py"


def _calls(text: str) -> list[tuple[int, str]]:
    """(line, argument text) of each TORCH_CHECK call."""
    calls = []
    for match in re.finditer(r"TORCH_CHECK\(", text):
        depth, i = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        calls.append((text.count("\n", 0, match.start()) + 1,
                      text[match.end():i - 1]))
    return calls


def _key(call: str) -> str:
    """The longest string literal of the message (adjacent literals
    joined), spaces at its ends removed."""
    pieces = re.findall(r'"((?:[^"\\]|\\.)*)"((?:\s*"(?:[^"\\]|\\.)*")*)',
                        call)
    joined = [head + "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', tail))
              for head, tail in pieces]
    return max(joined, key=len, default="").strip(" :;,()")


def main() -> int:
    tests = TESTS.read_text()
    # The tests write long messages as adjacent literals; compare the text.
    flat = re.sub(r'"\s*\n\s*f?"', "", tests)
    rows, missing = [], 0
    for line, call in _calls(SOURCE.read_text()):
        key = _key(call)
        found = bool(key) and key in flat
        missing += not found
        rows.append(f"| {line} | {key or '(no literal)'} | "
                    f"{'yes' if found else '**no**'} |")
    print("| line | message | tested |\n|---:|---|---|")
    print("\n".join(rows))
    print(f"\n{len(rows) - missing} of {len(rows)} checks tested")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
