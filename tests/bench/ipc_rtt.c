/*
 * The floor under any cross-process fabric hop on this host: the round
 * trip of one byte between two processes over a unix socket pair, each
 * side sleeping in poll() as a QEMU main loop does, optionally with
 * SPINNERS processes busy-looping meanwhile (as polling guests' vCPUs
 * keep host CPUs busy).  Prints microseconds per round trip
 * (tests/bench/xvm.sh runs it beside the guests' figures).
 *
 *   ipc_rtt [ROUND_TRIPS [SPINNERS]]
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Wait for a byte on @fd and return it; exits on EOF or error. */
static char wait_byte(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char c;

    if (poll(&p, 1, -1) != 1 || read(fd, &c, 1) != 1) {
        exit(1);
    }
    return c;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000, sv[2], i;
    int spin = argc > 2 ? atoi(argv[2]) : 0;
    pid_t spinners[64];
    double t0;
    char c = 1;

    if (n <= 0 || spin < 0 || spin > 64 ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        return 2;
    }
    for (i = 0; i < spin; i++) {
        spinners[i] = fork();
        if (spinners[i] == 0) {
            for (;;) {
                /* a polling vCPU */
            }
        }
    }
    if (fork() == 0) {
        for (i = 0; i < n; i++) {
            c = wait_byte(sv[1]);
            if (write(sv[1], &c, 1) != 1) {
                return 1;
            }
        }
        return 0;
    }
    t0 = now_us();
    for (i = 0; i < n; i++) {
        if (write(sv[0], &c, 1) != 1) {
            return 1;
        }
        c = wait_byte(sv[0]);
    }
    printf("%.2f\n", (now_us() - t0) / n);
    for (i = 0; i < spin; i++) {
        kill(spinners[i], SIGKILL);
    }
    while (wait(NULL) > 0) {
        /* the echo process and the spinners */
    }
    return 0;
}
