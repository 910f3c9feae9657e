/*
 * reg_storm: write a read-only register of a PCI device's BAR N times, as
 * fast as the guest can (one MMIO store each), then print the register.
 *
 *   reg_storm /sys/bus/pci/devices/BDF/resource1 OFFSET VALUE COUNT
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    volatile uint32_t *reg;
    unsigned long off, n, i;
    uint32_t val;
    void *bar;
    int fd;

    if (argc != 5) {
        fprintf(stderr, "usage: %s RESOURCE OFFSET VALUE COUNT\n", argv[0]);
        return 2;
    }
    off = strtoul(argv[2], NULL, 0);
    val = strtoul(argv[3], NULL, 0);
    n = strtoul(argv[4], NULL, 0);
    fd = open(argv[1], O_RDWR | O_SYNC);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    bar = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (bar == MAP_FAILED || off > 4092 || (off & 3)) {
        perror("mmap");
        return 1;
    }
    reg = (volatile uint32_t *)((char *)bar + off);
    for (i = 0; i < n; i++) {
        *reg = val;
    }
    printf("REG=0x%08x\n", *reg);
    return 0;
}
