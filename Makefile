# pvrdma: top-level build. Every expensive step is cached under
# $(PVRDMA_CACHE) (default ~/.cache/pvrdma) keyed by its inputs; build/
# holds links to the current artefacts.
#
#   make            build QEMU, rdma-core + provider, the module, the image
#   make image-6.12 the guest on Debian 13's 6.12 kernel instead of Debian
#                   12's 6.1: kernel, module (built in a Debian 13 root) and
#                   image, linked as build/vmlinuz-6.12, initrd-6.12.cpio.gz
#   make demo       build, boot two guests, show RDMA running between them
#   make driver-kernels  build the module against Debian's 6.1, 6.12 and
#                   newest 7.x kernels (in make check)
#   make provider-versions  build the provider in rdma-core 56.1 and the
#                   newest rdma-core in sid (in make check)
#   make deb        Debian packages for your own guests, in build/deb:
#                   pvrdma-dkms and ibverbs-provider-pvrdma (packaging/)
#   make host-deb   Debian packages of our QEMU for Debian 12 and 13 hosts,
#                   in build/host-deb: qemu-system-pvrdma, the command
#                   qemu-system-x86_64-pvrdma beside Debian's own QEMU
#                   (HOST_DEB_DISTS=bookworm or trixie: one of them)
#   make qemu-newest  the device in the newest QEMU of Debian's archive
#                   (resolved at run time), build/qemu-system-x86_64-newest
#                   (in make check: test-qemu-newest runs on it)
#   make check      unit tests, then guest tests (boots guests under TCG)
#   make unit       unit tests of the device core only
#   make qemu-asan  build/qemu-system-x86_64-asan: the device code built
#                   with ASan+UBSan (guest tests marked asan run on it)
#   make vm         boot a guest with a shell on this terminal
#   make lint       checkpatch: QEMU's on hw/pvrdma, Linux's on guest-driver
#   make bench-micro  the device microbenchmark (tests/bench/micro.c)
#   make bench      this device vs Soft-RoCE vs TCP in guests, with plots
#                   (tests/bench/bench.sh; BENCH_QUICK=1 for a short run)
#   make soak       two guests with verified traffic and churn for 30 min,
#                   a third joining and leaving; QEMU and device figures
#                   must stay flat (tests/soak/soak.sh; SOAK_MINUTES=N)

SHELL := /bin/bash
OUT := build
KERNEL_TREE = $(shell readlink -f $(OUT)/kernel)
KVER = $(notdir $(KERNEL_TREE))

.PHONY: all qemu kernel driver rdma-core image demo check unit guest-tests \
        vm clean lint kernel-6.12 driver-6.12 image-6.12

# $(call relink,TARGET,LINK): LINK becomes a symbolic link to TARGET in one
# step, a rename over it (scripts/lib.sh relink): scripts/prebuild.sh runs
# some of these targets while tests use the links.
relink = ln -sfn $(1) $(2).tmp && mv -Tf $(2).tmp $(2)

all: image

qemu:
	scripts/build-qemu.sh >/dev/null

# The same device in the newest QEMU of Debian's archive (trixie-backports
# or sid; the newest whose source downloads), its own cache directories;
# tests/guest/test-qemu-newest.sh runs on it. A packaging step takes
# the binary build/qemu-system-x86_64-newest links to and pvrdma-qemu.env
# beside it (QEMU_DEB_VERSION, QEMU_SRC_VERSION, QEMU_SRC_DIR).
.PHONY: qemu-newest
qemu-newest:
	QEMU_SERIES=newest scripts/build-qemu.sh >/dev/null

# QEMU with the device code under AddressSanitizer and UBSan (the rest of
# QEMU plain), in the cache; guest tests marked "asan" in
# tests/guest/TESTS run on it (PVRDMA_ASAN=1 tests/guest/run-all.sh: all).
.PHONY: qemu-asan
qemu-asan: qemu
	$(call relink,"$$(scripts/build-qemu-asan.sh)",$(OUT)/qemu-system-x86_64-asan)

kernel:
	@mkdir -p $(OUT)
	$(call relink,"$$(scripts/fetch-kernel.sh)",$(OUT)/kernel)
	$(call relink,"$$(readlink -f $(OUT)/kernel)/root/boot/vmlinuz-$$(basename "$$(readlink -f $(OUT)/kernel)")",$(OUT)/vmlinuz)

driver: kernel
	@test -d /usr/src/linux-headers-$(KVER) || { echo "linux-headers-$(KVER) is not installed: run scripts/install-deps.sh" >&2; exit 1; }
	$(MAKE) -C guest-driver KVER=$(KVER)
	cp guest-driver/pvrdma.ko $(OUT)/pvrdma.ko

rdma-core:
	@mkdir -p $(OUT)
	$(call relink,"$$(scripts/build-rdma-core.sh)",$(OUT)/rdma-core)

image: qemu driver rdma-core
	$(call relink,"$$(scripts/build-image.sh $(OUT)/kernel $(OUT)/rdma-core $(OUT)/pvrdma.ko)",$(OUT)/initrd.cpio.gz)

# The same guest userspace on Debian 13's newest 6.12 kernel (resolved at
# run time; tests/guest/test-kernel-6.12.sh boots it). build/modules-6.12
# holds pvrdma.ko and the kernel-verbs test module built for exactly that
# release (scripts/build-driver-kernels.sh --keep, in the Debian 13 root).
kernel-6.12:
	@mkdir -p $(OUT)
	tree=$$(scripts/fetch-kernel.sh 6.12) && \
	$(call relink,"$$tree",$(OUT)/kernel-6.12) && \
	$(call relink,"$$tree/root/boot/vmlinuz-$$(basename "$$tree")",$(OUT)/vmlinuz-6.12)

driver-6.12: kernel-6.12
	out=$$(KERNEL_SERIES=6.12 \
	       KERNEL_RELEASE=$$(basename "$$(readlink -f $(OUT)/kernel-6.12)") \
	       scripts/build-driver-kernels.sh --keep) && \
	$(call relink,"$${out##* }",$(OUT)/modules-6.12)

image-6.12: driver-6.12 rdma-core
	img=$$(scripts/build-image.sh $(OUT)/kernel-6.12 $(OUT)/rdma-core \
	       $(OUT)/modules-6.12/pvrdma.ko) && \
	$(call relink,"$$img",$(OUT)/initrd-6.12.cpio.gz)

demo: all
	scripts/demo.sh

# Needs only rdma-core (for the provider), not QEMU or a kernel.
.PHONY: deb
deb:
	scripts/build-debs.sh

# Our QEMU as qemu-system-pvrdma_<ver>~deb12/~deb13 (Debian 13's built in
# a Debian 13 root, cached); tests/guest/test-host-deb.sh installs them.
.PHONY: host-deb
host-deb:
	scripts/build-host-deb.sh

unit:
	$(MAKE) -C tests/unit check

guest-tests: all
	tests/guest/run-all.sh

# The module against every Debian kernel series in the archive (6.1, 6.12,
# the newest 7.x), warnings failing the build.
.PHONY: driver-kernels
driver-kernels:
	scripts/build-driver-kernels.sh

# The rdma-core provider in rdma-core 56.1 (standing for 44.0: same
# provider ABI) and the newest rdma-core in sid, warnings failing it.
.PHONY: provider-versions
provider-versions:
	scripts/build-provider-versions.sh

check: lint unit driver-kernels provider-versions guest-tests

vm: all
	scripts/vm.sh

# Fails on any checkpatch ERROR or WARNING; the two checkpatch.pl scripts
# come from Debian's QEMU and linux-source-6.1 packages (see the script).
lint:
	scripts/lint.sh

clean:
	rm -rf $(OUT)
	-$(MAKE) -C guest-driver clean
	-$(MAKE) -C tests/unit clean

# libFuzzer harness of the device core (tests/fuzz, needs clang): replay the
# saved reproducers, then fuzz for FUZZ_SECONDS (fails on any finding).
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	$(MAKE) -C tests/fuzz regress
	$(MAKE) -C tests/fuzz run SECONDS=$(FUZZ_SECONDS)

# make check replays the saved reproducers and seeds only: CI stays
# deterministic; fuzzing itself is `make fuzz`.
# The device microbenchmark (tests/bench/micro.c): host and CPU time per
# work request natively; make check runs it in smoke mode (no thresholds:
# figures belong in reports, these machines are noisy).
.PHONY: bench bench-micro bench-smoke
# In guests it boots (one VM, then two): results, tables and plots in
# build/bench (tests/bench/bench.sh, docs/benchmarks.md).
bench: all
	tests/bench/bench.sh
bench-micro:
	$(MAKE) -C tests/bench micro
bench-smoke:
	$(MAKE) -C tests/bench micro-smoke fabric-scale-smoke
check: bench-smoke

.PHONY: soak
soak: all
	tests/soak/soak.sh

.PHONY: fuzz-regress
fuzz-regress:
	$(MAKE) -C tests/fuzz regress
check: fuzz-regress
