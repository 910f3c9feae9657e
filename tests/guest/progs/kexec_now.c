/*
 * kexec_now: boot another kernel now, without firmware or a reset, as
 * kexec-tools' `kexec -l` + `kexec -e` would (the image has no kexec-tools:
 * Debian's needs the Xen libraries).  The running kernel shuts its
 * devices down and jumps into the new one; the device model sees no reset.
 *
 *   kexec_now KERNEL INITRD    (the command line: this kernel's)
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LINUX_REBOOT_CMD_KEXEC 0x45584543

int main(int argc, char **argv)
{
    char cmdline[4096];
    ssize_t n;
    int kfd, ifd, cfd;

    if (argc != 3) {
        fprintf(stderr, "usage: %s KERNEL INITRD\n", argv[0]);
        return 2;
    }
    cfd = open("/proc/cmdline", O_RDONLY);
    n = cfd < 0 ? -1 : read(cfd, cmdline, sizeof(cmdline) - 1);
    if (n <= 0) {
        perror("/proc/cmdline");
        return 1;
    }
    cmdline[n] = 0;
    cmdline[strcspn(cmdline, "\n")] = 0;
    kfd = open(argv[1], O_RDONLY);
    ifd = open(argv[2], O_RDONLY);
    if (kfd < 0 || ifd < 0) {
        perror("open");
        return 1;
    }
    if (syscall(SYS_kexec_file_load, kfd, ifd, strlen(cmdline) + 1,
                cmdline, 0UL)) {
        perror("kexec_file_load");
        return 1;
    }
    printf("kexec_now: loaded, jumping\n");
    fflush(stdout);
    sync();
    reboot(LINUX_REBOOT_CMD_KEXEC);
    perror("reboot(KEXEC)");
    return 1;
}
