"""Stub the CUDA libraries PyPI's aarch64 torch 2.13.0 links, so it imports on a CPU-only (emulated) ARM.

Usage: python tools/arm/cuda_stubs.py TORCH_LIB_DIR AARCH64_SYSROOT BUILD_DIR   (tools/arm/setup_emulated.sh)

Why: on aarch64, PyPI's torch==2.13.0 is a CUDA build (+cu130): even libtorch_cpu.so needs
libcudart and libcupti, and the index lacks some of the CUDA wheels it pins for aarch64. A CPU
never calls them. For each library torch needs that is neither in torch/lib nor in the sysroot,
build (with aarch64-linux-gnu-gcc) a shared object with its soname, the version nodes torch asks
for, and every symbol torch takes from it, each a function returning 100 (cudaErrorNoDevice; an
error status for the other libraries). Unversioned symbols nothing else defines (libcuda's,
NCCL's) go into the libcudart stub.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout


def dynamic_symbols(path: Path) -> list[list[str]]:
    """The rows of `readelf --dyn-syms`: [num:, value, size, type, bind, vis, ndx, name]."""
    rows = (line.split() for line in readelf("--dyn-syms", "-W", str(path)).splitlines())
    return [r for r in rows if len(r) >= 8 and r[0].endswith(":")]


def defined(path: Path) -> set[str]:
    return {r[7].split("@")[0] for r in dynamic_symbols(path) if r[6] != "UND"}


def main(torch_lib: Path, sysroot: Path, build: Path) -> None:
    libs = sorted(torch_lib.glob("*.so*")) + sorted(torch_lib.parent.glob("_C*.so"))
    needed = {n for lib in libs for n in re.findall(r"\(NEEDED\).*\[(.*)\]", readelf("-d", str(lib)))}
    system = {n: hits[0] for n in needed if (hits := sorted(sysroot.glob(f"**/{n}")))}
    missing = sorted(needed - {p.name for p in libs} - set(system))

    takes: dict[str, set[str]] = defaultdict(set)  # version node -> symbols torch takes from it
    unversioned: set[str] = set()
    provided: set[str] = set()
    for lib in libs:
        for r in dynamic_symbols(lib):
            if r[6] != "UND":
                provided.add(r[7].split("@")[0])
            elif r[4] != "WEAK" and r[7]:
                name, _, node = r[7].partition("@")
                (takes[node].add(name) if node else unversioned.add(name))
    nodes: dict[str, set[str]] = defaultdict(set)  # soname -> its version nodes torch needs
    for lib in libs:
        soname = None
        for line in readelf("-V", "-W", str(lib)).splitlines():
            if found := re.search(r"File: (\S+)", line):
                soname = found.group(1)
            elif (found := re.search(r"Name: (\S+)\s+Flags", line)) and soname:
                nodes[soname].add(found.group(1))
    for path in [*system.values(), sysroot / "usr/bin/python3.11"]:  # the interpreter exports the C API
        provided |= defined(path.resolve())
    orphans = unversioned - provided

    build.mkdir(parents=True, exist_ok=True)
    for soname in missing:
        names = {s for node in nodes[soname] for s in takes[node]}
        names |= orphans if "cudart" in soname else set()
        source, script = build / f"{soname}.c", build / f"{soname}.map"
        source.write_text("".join(f"long {n}(void) {{ return 100; }}\n" for n in sorted(names)
                                  if re.fullmatch(r"[A-Za-z_]\w*", n)))
        versions = sorted(nodes[soname])
        script.write_text("".join(f"{v} {{ {'global: *; ' if i == 0 else ''}}};\n"
                                  for i, v in enumerate(versions)) or "{ global: *; };\n")
        subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-w", f"-Wl,-soname,{soname}",
                        f"-Wl,--version-script,{script}", "-o", str(torch_lib / soname), str(source)],
                       check=True)
        print(f"{soname}: {len(names)} symbols, version nodes {versions}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*map(Path, sys.argv[1:]))
