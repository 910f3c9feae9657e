# shellcheck shell=bash
# Host-side helper for tests that run our QEMU inside a test guest (nested
# QEMU, both under TCG), sourced after tests/guest/lib.sh:
#
#   nested_bundle DIR INNER_CMD [SRC[:DST]...]
#
# packs into DIR, and lists in the array NESTED_ADDS as scripts/vm.sh
# arguments for the outer guest: our QEMU (stripped) as
# /usr/bin/qemu-system-x86_64, its shared libraries in /usr/lib/nested,
# the firmware it needs in /usr/share/nested-fw, the guest kernel as
# /nested/vmlinuz (an ELF vmlinux where it can: scripts/lib.sh,
# boot_kernel) and /nested/initrd: the test image (uncompressed) with
# INNER_CMD as the
# inner guest's command and the host files SRC at DST (as vm.sh --add).
# The outer guest starts inner guests with tests/guest/inner.sh.

nested_bundle() {
    local dir=$1 cmd=$2 qemu
    shift 2
    rm -rf "$dir" && mkdir -p "$dir/lib" "$dir/fw"
    qemu=$(readlink -f "$PVRDMA_OUT/qemu-system-x86_64")
    strip -o "$dir/qemu-system-x86_64" "$qemu"
    ldd "$qemu" | awk '/=> \// { print $3 }' | xargs -r cp -L -t "$dir/lib"
    cp -L /usr/share/seabios/bios-256k.bin /usr/share/qemu/linuxboot_dma.bin \
        /usr/share/qemu/kvmvapic.bin /usr/share/qemu/pvh.bin "$dir/fw/"
    guest_files_cpio "$dir/inner.cpio" "$cmd" "$@"
    # (the kernel and image in the forms that boot fastest: scripts/lib.sh)
    cat "$dir/inner.cpio" "$(boot_initrd "$PVRDMA_OUT/initrd.cpio.gz")" \
        > "$dir/initrd"
    rm "$dir/inner.cpio"
    NESTED_ADDS=(
        --add "$dir/qemu-system-x86_64:/usr/bin/qemu-system-x86_64"
        --add "$dir/lib:/usr/lib/nested"
        --add "$dir/fw:/usr/share/nested-fw"
        --add "$(boot_kernel "$PVRDMA_OUT/vmlinuz"):/nested/vmlinuz"
        --add "$dir/initrd:/nested/initrd"
        --add "$TESTS_TOP/tests/guest/inner.sh"
        --add "$TESTS_TOP/tests/guest/rxe.sh")
}
