#!/usr/bin/env python3
"""Host code stays free of Kokkos. Against a CUDA Kokkos, every file of a target that links
Kokkos is compiled by nvcc (Kokkos' launcher sends it there), and nvcc cannot compile some host
libraries (toml++) nor keep warnings as errors on code it rewrites. So the command line (app/),
the I/O (io/) and the communication layer (parallel/) must not include a Kokkos header, directly
or through the project's own headers: CMake links them to the engine and the model for linking
only, and the host compiler builds them.

Follows `#include "..."` through the repository's headers and prints, for each offending source
file, the chain of includes that reaches Kokkos; exits 1 if there is any.
Usage: check_host_only.py ROOT"""
import pathlib
import re
import sys

HOST_DIRS = ("app", "io", "parallel")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
KOKKOS = re.compile(r"^Kokkos")


def includes(path):
    return INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace"))


def kokkos_chain(root, path, seen):
    """The include chain from `path` to a Kokkos header, or None."""
    for kind, name in includes(path):
        if kind == "<":
            if KOKKOS.match(name):
                return [f"<{name}>"]
            continue
        header = root / name
        if not header.is_file() or header in seen:
            continue
        seen.add(header)
        chain = kokkos_chain(root, header, seen)
        if chain is not None:
            return [name] + chain
    return None


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    problems = []
    for d in HOST_DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.suffix not in (".cpp", ".hpp"):
                continue
            chain = kokkos_chain(root, path, set())
            if chain is not None:
                rel = path.relative_to(root)
                problems.append(f"{rel}: reaches Kokkos through " + " -> ".join(chain))
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} host file(s) include Kokkos: hide the model behind a Kokkos-free "
              "header (a forward declaration, a class with a private implementation)")
        return 1
    print(f"host code free of Kokkos: {', '.join(HOST_DIRS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
