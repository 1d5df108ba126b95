#!/usr/bin/env python3
"""Size limits of the code, as the style guide sets them: no source file over 600 lines (unless
listed below with its reason), and no function over 80 lines in the engine (engine/, parallel/),
where the training loop must stay readable as it grows. Prints every offender and exits 1.

Functions are found by brace structure after comments and string literals are removed: a brace
that follows a parenthesised signature (or a constructor's initialiser list) outside any other
function opens a function; lambdas and blocks inside it count towards it.
Usage: check_sizes.py ROOT"""
import pathlib
import re
import sys

FILE_LIMIT = 600
FUNCTION_LIMIT = 80
FUNCTION_DIRS = ("engine", "parallel")
SOURCE_DIRS = ("app", "engine", "parallel", "layers", "io", "tests", "bench")
# Longer files and why.
ALLOWED = {}


def strip(text):
    """Comments and string/char literals replaced by spaces, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SIGNATURE = re.compile(
    r"\)\s*(const\s*)?(noexcept(\([^)]*\))?\s*)?(override\s*)?(->\s*[\w:<>,\s*&]+)?\s*$"
    r"|\)\s*:\s*[\w:]+[({].*$",
    re.S,
)
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else)\b")


def functions(code):
    """(first line, line count) of every function body."""
    found, stack, start = [], [], 0  # stack of (kind, line)
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";":
            if not stack or stack[-1][0] != "function":
                start = i + 1
        elif c == "{":
            head = code[start:i]
            inside = any(kind == "function" for kind, _ in stack)
            if inside:
                kind = "block"
            elif re.match(r"\s*(template\s*<[^>]*>\s*)?(namespace|extern)\b", head):
                kind = "namespace"
            elif re.match(r"\s*(template\s*<.*>\s*)?(class|struct|union|enum)\b", head, re.S):
                kind = "class"
            elif SIGNATURE.search(head) and not CONTROL.match(head) and "=" not in head.split("(")[0]:
                kind = "function"
            else:
                kind = "other"
            stack.append((kind, line))
            start = i + 1
        elif c == "}":
            if stack:
                kind, first = stack.pop()
                if kind == "function":
                    found.append((first, line - first + 1))
            if not stack or stack[-1][0] != "function":
                start = i + 1
    return found


def main(root):
    root = pathlib.Path(root)
    problems = []
    for d in SOURCE_DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".cu") or "build" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            lines = text.count("\n")
            if lines > FILE_LIMIT and rel not in ALLOWED:
                problems.append(f"{rel}: {lines} lines (limit {FILE_LIMIT}): split it by concern")
            if d in FUNCTION_DIRS:
                for first, count in functions(strip(text)):
                    if count > FUNCTION_LIMIT:
                        problems.append(
                            f"{rel}:{first}: a function of {count} lines (limit "
                            f"{FUNCTION_LIMIT} in {', '.join(FUNCTION_DIRS)}/): give its parts "
                            "names of their own"
                        )
    for p in problems:
        print(p)
    print(f"check_sizes: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
