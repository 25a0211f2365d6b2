"""The one numeric environment in which stored notebook outputs are made and checked.

Why: the same float32 program gives different last bits on different x86 CPUs, because
PyTorch's vectorised kernels (softmax, erf, reductions), MKL's matrix products and oneDNN
each pick code for the widest instruction set the CPU has (AVX-512 and AMX on recent Intel,
AVX2 on AMD), and a parallel reduction splits its work by the number of threads. Capping
every library to AVX2 and fixing the thread count makes them all run the same code, so a
notebook executed on one machine prints the same digits on any x86-64 CPU with AVX2.
On ARM64 (Apple silicon, Graviton) PyTorch is held to NEON and the same thread count; its
matrix products come from another BLAS, so the last bits may differ from the book's: what an
emulated ARM run printed is in benchmarks/results/arm_emulated_nbval.txt (book/running.md).

Used by `conftest.py` (every pytest run, so nbval's kernels inherit it), `tools/execute.py`
(`make execute`) and `make book-execute`. As a command it runs another command inside it:

    python tools/numeric_env.py -- jupyter-book build .
    python tools/numeric_env.py --describe    # what `make test` prints first
"""
from __future__ import annotations

import os
import platform
import sys

X86_CAPS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # PyTorch's own vectorised kernels
    "MKL_CBWR": "AVX2,STRICT",  # MKL's conditional numerical reproducibility: the AVX2 code path
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (mkldnn) kernels
    "DNNL_MAX_CPU_ISA": "AVX2",  # the same, older name
}
ARM_CAPS = {
    "ATEN_CPU_CAPABILITY": "default",  # NEON, which every ARM64 CPU has; no SVE (Apple silicon has none)
}
EVERYWHERE = {
    "OMP_NUM_THREADS": "2",  # parallel reductions split work by thread count
    "MKL_NUM_THREADS": "2",
    "PYTHONHASHSEED": "0",
}


def for_machine(machine: str) -> dict[str, str]:
    """The environment for a CPU architecture (platform.machine()): x86 caps on x86-64, NEON on ARM64.

    The x86 names mean nothing elsewhere, and PyTorch warns about an ATEN_CPU_CAPABILITY it cannot
    use: under the x86 caps, the first cell of an ARM run that computes printed a UserWarning, a new
    output nbval reported (benchmarks/results/arm_emulated_nbval.txt).

    >>> for_machine("aarch64")["ATEN_CPU_CAPABILITY"], "MKL_CBWR" in for_machine("AMD64")
    ('default', True)
    """
    kind = machine.lower()
    caps = X86_CAPS if kind in ("x86_64", "amd64") else ARM_CAPS if kind in ("aarch64", "arm64") else {}
    return {**caps, **EVERYWHERE}


NUMERIC_ENV = for_machine(platform.machine())


def apply() -> None:
    """Set the numeric environment in this process; must run before torch is first used."""
    os.environ.update(NUMERIC_ENV)


def describe() -> str:
    """One line saying what a run used: for failure reports (printed in pytest's header)."""
    import torch

    flags: set[str] = set()
    try:  # x86 lists its instruction sets under "flags", ARM under "Features"
        with open("/proc/cpuinfo") as f:
            flags = set(next((line.split(":", 1)[1].split() for line in f
                              if line.startswith(("flags", "Features"))), []))
    except OSError:
        pass
    native = next((isa for flag, isa in (("amx_tile", "amx"), ("avx512f", "avx512"), ("avx2", "avx2"),
                                         ("sve", "sve"), ("asimd", "neon")) if flag in flags), "unknown")
    caps = ", ".join(f"{k}={os.environ.get(k)}" for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR",
                                                           "ONEDNN_MAX_CPU_ISA"))
    return (
        f"numeric env: torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()} "
        f"(native {native}, {platform.machine()}), {torch.get_num_threads()} threads, {caps}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    apply()
    if args == ["--describe"]:  # `make test` prints it first, so a failure log says where it ran
        print(describe())
        sys.exit()
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    try:
        os.execvp(args[0], args)
    except OSError as err:
        sys.exit(f"numeric_env: cannot run {args[0]!r}: {err.strerror}")
