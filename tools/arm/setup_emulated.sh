#!/bin/bash
# An ARM64 (aarch64) copy of the course's environment on an x86-64 Debian 12 machine, run under
# user-mode QEMU as a NEON-only core (Neoverse-N1: no SVE, like Apple silicon). It is how
# benchmarks/results/arm_emulated_nbval.txt was measured; see book/running.md. As root, about
# 1 GB of downloads, 10 minutes. Then:
#   PYTHONPATH=$PWD /opt/armvenv/bin/python tools/execute.py COPY.ipynb   # chapters run on "ARM"
#   .venv/bin/python tools/arm/compare_outputs.py chapters/X.ipynb COPY.ipynb
set -euo pipefail
ROOT=/opt/arm64root VENV=/opt/armvenv WHEELS=/opt/armwheels
SITE=$VENV/lib/python3.11/site-packages
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PLATFORMS=(--platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64
           --platform manylinux_2_17_aarch64 --platform linux_aarch64)

apt-get install -y --no-install-recommends qemu-user-static gcc-aarch64-linux-gnu
dpkg --add-architecture arm64 && apt-get update -qq
# Debian 12's aarch64 CPython 3.11.2 and its libraries, unpacked into a sysroot (not installed:
# python3:arm64 would replace the machine's own python3).
mkdir -p /opt/arm64dl "$ROOT" && cd /opt/arm64dl
apt-get download $(printf '%s:arm64 ' gcc-12-base libacl1 libbz2-1.0 libc6 libcom-err2 libcrypt1 \
  libdb5.3 libexpat1 libffi8 libgcc-s1 libgssapi-krb5-2 libk5crypto3 libkeyutils1 libkrb5-3 \
  libkrb5support0 liblzma5 libmd0 libncursesw6 libnsl2 libpcre2-8-0 libpython3-stdlib \
  libpython3.11-minimal libpython3.11-stdlib libreadline8 libselinux1 libsqlite3-0 libssl3 libtinfo6 \
  libtirpc3 libuuid1 libzstd1 python3-minimal python3.11-minimal python3.11-venv python3.11 python3 \
  zlib1g libstdc++6) python3-pip-whl python3-setuptools-whl media-types
for deb in *.deb; do dpkg -x "$deb" "$ROOT"; done
# What QEMU 7.2 does not emulate for aarch64 and PyTorch's cpuinfo reads: an ARM /proc/cpuinfo and
# MIDR registers for the two cores (without them `import torch` segfaults in cpuinfo_arm_linux_init).
mkdir -p "$ROOT/proc"
for c in 0 1; do
  printf 'processor\t: %s\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x4\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n' $c
  d=$ROOT/sys/devices/system/cpu/cpu$c/regs/identification
  mkdir -p "$d" && echo 0x00000000414fd0c1 > "$d/midr_el1" && echo 0x0 > "$d/revidr_el1"
done > "$ROOT/proc/cpuinfo"

qemu-aarch64-static -L "$ROOT" -cpu neoverse-n1 "$ROOT/usr/bin/python3.11" -m venv --without-pip "$VENV"
rm "$VENV"/bin/python*
cat > "$VENV/bin/python3.11" <<'WRAP'
#!/bin/sh
# argv[0] stays this script, so sys.executable is it and nbval's kernels run emulated too.
exec qemu-aarch64-static -L /opt/arm64root -cpu "${ARM_CPU:-neoverse-n1}" -0 "$0" /opt/arm64root/usr/bin/python3.11 "$@"
WRAP
chmod +x "$VENV/bin/python3.11" && ln -s python3.11 "$VENV/bin/python" && ln -s python3.11 "$VENV/bin/python3"

# The lock's aarch64 wheels, installed from here (pip under QEMU is slow). `future` is an sdist.
mkdir -p "$WHEELS" && grep -v '^future==' "$HERE/requirements.txt" > /tmp/arm-requirements.txt
PIP=("$HERE/.venv/bin/pip")
"${PIP[@]}" download -q --dest "$WHEELS" "${PLATFORMS[@]}" --python-version 3.11 --implementation cp \
  --abi cp311 --only-binary :all: --no-deps -r /tmp/arm-requirements.txt
"${PIP[@]}" install -q --no-index --find-links "$WHEELS" --no-deps --no-compile --target "$SITE" \
  "${PLATFORMS[@]}" --python-version 3.11 --implementation cp --abi cp311 --only-binary :all: \
  -r /tmp/arm-requirements.txt
"${PIP[@]}" download -q --dest "$WHEELS" --no-deps --no-binary :all: "$(grep '^future==' "$HERE/requirements.txt")"
"${PIP[@]}" install -q --no-deps --target /tmp/arm-future "$WHEELS"/future-*.tar.gz && cp -r /tmp/arm-future/* "$SITE/"
# PyPI's aarch64 torch 2.13.0 is a CUDA build: its libraries need CUDA's, which a CPU never calls.
# Stub them (tools/arm/cuda_stubs.py) rather than download gigabytes the index does not all have.
"$HERE/.venv/bin/python" "$HERE/tools/arm/cuda_stubs.py" "$SITE/torch/lib" "$ROOT" /tmp/arm-stubs
"$VENV/bin/python" -c "import torch; print(torch.__version__, torch.backends.cpu.get_cpu_capability())"
