# pvrdma: top-level build. Every expensive step is cached under
# $(PVRDMA_CACHE) (default ~/.cache/pvrdma) keyed by its inputs; build/
# holds links to the current artefacts.
#
#   make            build QEMU, rdma-core + provider, the module, the image
#   make demo       build, boot two guests, show RDMA running between them
#   make check      unit tests, then guest tests (boots guests under TCG)
#   make unit       unit tests of the device core only
#   make vm         boot a guest with a shell on this terminal
#   make lint       checkpatch: QEMU's on hw/pvrdma, Linux's on guest-driver
#   make bench-micro  the device microbenchmark (tests/bench/micro.c)
#   make bench      this device vs Soft-RoCE vs TCP in guests, with plots
#                   (tests/bench/bench.sh; BENCH_QUICK=1 for a short run)

SHELL := /bin/bash
OUT := build
KERNEL_TREE = $(shell readlink -f $(OUT)/kernel)
KVER = $(notdir $(KERNEL_TREE))

.PHONY: all qemu kernel driver rdma-core image demo check unit guest-tests \
        vm clean lint

all: image

qemu:
	scripts/build-qemu.sh >/dev/null

kernel:
	@mkdir -p $(OUT)
	ln -sfn "$$(scripts/fetch-kernel.sh)" $(OUT)/kernel
	ln -sfn "$$(readlink -f $(OUT)/kernel)/root/boot/vmlinuz-$$(basename "$$(readlink -f $(OUT)/kernel)")" $(OUT)/vmlinuz

driver: kernel
	@test -d /usr/src/linux-headers-$(KVER) || { echo "linux-headers-$(KVER) is not installed: run scripts/install-deps.sh" >&2; exit 1; }
	$(MAKE) -C guest-driver KVER=$(KVER)
	cp guest-driver/pvrdma.ko $(OUT)/pvrdma.ko

rdma-core:
	@mkdir -p $(OUT)
	ln -sfn "$$(scripts/build-rdma-core.sh)" $(OUT)/rdma-core

image: qemu driver rdma-core
	ln -sfn "$$(scripts/build-image.sh $(OUT)/kernel $(OUT)/rdma-core $(OUT)/pvrdma.ko)" $(OUT)/initrd.cpio.gz

demo: all
	scripts/demo.sh

unit:
	$(MAKE) -C tests/unit check

guest-tests: all
	tests/guest/run-all.sh

check: lint unit guest-tests

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
	$(MAKE) -C tests/bench micro-smoke
check: bench-smoke

.PHONY: fuzz-regress
fuzz-regress:
	$(MAKE) -C tests/fuzz regress
check: fuzz-regress
