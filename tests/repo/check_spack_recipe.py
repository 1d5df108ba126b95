#!/usr/bin/env python3
"""The Spack recipe keeps up with the build: every switch of cmake/GridlmOptions.cmake that a
user installs with is set by spack/spack_repo/gridlm/packages/gridlm/package.py, and the recipe
is a package-API-v2 one (its repo.yaml says so and it imports the builtin build systems).
Runs without Spack: it reads the files.
  check_spack_recipe.py SOURCE_DIR"""
import re
import sys
from pathlib import Path

# Switches only the developers' own builds use (the fuzz build is a clang build of its own, the
# sanitizer build a slow one for the test suite).
NOT_FOR_INSTALLS = {"GRIDLM_BUILD_FUZZ", "GRIDLM_FUZZ_SECONDS", "GRIDLM_SANITIZE"}

src = Path(sys.argv[1])
options = (src / "cmake/GridlmOptions.cmake").read_text()
known = re.search(r"set\(_gridlm_known_options(.*?)\)", options, re.S).group(1).split()
repo = src / "spack/spack_repo/gridlm"
recipe = (repo / "packages/gridlm/package.py").read_text()
problems = []
for option in sorted(set(known) - NOT_FOR_INSTALLS):
    if f'"{option}"' not in recipe:
        problems.append(f"{option} (cmake/GridlmOptions.cmake) is not set by the recipe")
if not re.search(r"^\s*api:\s*v2\.\d+\s*$", (repo / "repo.yaml").read_text(), re.M):
    problems.append("spack/spack_repo/gridlm/repo.yaml does not declare api: v2.x")
if "from spack_repo.builtin.build_systems.cmake import CMakePackage" not in recipe:
    problems.append("package.py does not import CMakePackage from spack_repo.builtin (API v2)")
try:
    compile(recipe, "package.py", "exec")
except SyntaxError as e:
    problems.append(f"package.py does not parse: {e}")
for p in problems:
    print(f"check_spack_recipe: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"check_spack_recipe: {len(set(known) - NOT_FOR_INSTALLS)} switches mapped; API v2")
