#!/usr/bin/env bash
# Install what building and testing needs on a Debian 12 machine (as root,
# or through sudo): compilers and build tools for QEMU, rdma-core and the
# guest module, the headers of Debian 12's current 6.1 kernel, firmware for
# booting guests, the unit-test libraries, and perl for make lint's
# checkpatch.pl scripts.
set -euo pipefail
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

$SUDO apt-get update -q
abi=$(apt-cache depends linux-image-amd64 |
      sed -n 's/.*Depends: linux-image-\(6\.1\.0-[0-9]*-amd64\).*/\1/p' | head -n 1)
[ -n "$abi" ] || { echo "cannot resolve the current Debian 12 kernel" >&2; exit 1; }

$SUDO apt-get install -y -q --no-install-recommends \
    build-essential gcc make git python3 python3-venv pkg-config perl \
    ninja-build cmake flex bison rsync file cpio kmod xz-utils gzip zstd \
    ccache ca-certificates debootstrap e2fsprogs \
    libglib2.0-dev libpixman-1-dev libslirp-dev libfdt-dev zlib1g-dev \
    libnl-3-dev libnl-route-3-dev libudev-dev libsystemd-dev libibverbs-dev \
    librdmacm-dev libgnutls28-dev gnutls-bin \
    libcmocka-dev valgrind clang libclang-rt-14-dev llvm \
    busybox-static iproute2 seabios qemu-system-data qemu-utils gnuplot-nox \
    "linux-headers-$abi"
echo "dependencies installed (guest kernel $abi)"
