// SPDX-License-Identifier: GPL-2.0
/*
 * MPI ping-pong with data verification, for two ranks (one per VM).
 *
 * For each size from 1 byte to 4 MiB (x4 steps), ITERS round trips: rank
 * 0 sends a buffer filled from a seed that changes with every message,
 * rank 1 checks every byte, answers with the bytes of a second seed, and
 * rank 0 checks those. Then an MPI_Allreduce of 1 Mi integers checks each
 * element of the sum. Any mismatch names the size, iteration and offset
 * and aborts with status 1. Rank 0 prints one line per size (round-trip
 * time, for information only) and a final line with the bytes verified.
 *
 *   mpi_pingpong [ITERS]    (default 20)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (4u << 20)
#define REDUCE_COUNT (1u << 20)

static int rank;

static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint32_t x = seed ^ (uint32_t)(i * 2654435761u);

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(seed, i);
}

static void check(const uint8_t *buf, size_t len, uint32_t seed,
		  size_t size, int iter)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != pattern_byte(seed, i)) {
			fprintf(stderr,
				"rank %d: size %zu iteration %d: byte %zu is 0x%02x, expected 0x%02x\n",
				rank, size, iter, i, buf[i],
				pattern_byte(seed, i));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20, nranks;
	unsigned long long verified = 0;
	uint8_t *buf;
	int *vals, *sums;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2 || iters < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 %s [ITERS>0]\n",
				argv[0]);
		MPI_Finalize();
		return 2;
	}
	buf = malloc(MAX_SIZE);
	vals = malloc(REDUCE_COUNT * sizeof(*vals));
	sums = malloc(REDUCE_COUNT * sizeof(*sums));
	if (!buf || !vals || !sums) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	for (size_t size = 1; size <= MAX_SIZE; size *= 4) {
		double t0 = MPI_Wtime();

		for (int it = 0; it < iters; it++) {
			uint32_t ping = (uint32_t)(size * 131 + it * 2);
			uint32_t pong = ping + 1;

			if (rank == 0) {
				fill(buf, size, ping);
				MPI_Send(buf, (int)size, MPI_BYTE, 1, it,
					 MPI_COMM_WORLD);
				memset(buf, 0, size);
				MPI_Recv(buf, (int)size, MPI_BYTE, 1, it,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(buf, size, pong, size, it);
			} else {
				memset(buf, 0, size);
				MPI_Recv(buf, (int)size, MPI_BYTE, 0, it,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(buf, size, ping, size, it);
				fill(buf, size, pong);
				MPI_Send(buf, (int)size, MPI_BYTE, 0, it,
					 MPI_COMM_WORLD);
			}
			verified += size;
		}
		if (rank == 0)
			printf("mpi_pingpong: %8zu bytes x %d verified, %.1f us per round trip\n",
			       size, iters,
			       (MPI_Wtime() - t0) * 1e6 / iters);
	}

	for (unsigned int i = 0; i < REDUCE_COUNT; i++)
		vals[i] = (int)(i * 3u) + rank * 7;
	MPI_Allreduce(vals, sums, REDUCE_COUNT, MPI_INT, MPI_SUM,
		      MPI_COMM_WORLD);
	for (unsigned int i = 0; i < REDUCE_COUNT; i++) {
		if (sums[i] != (int)(i * 6u) + 7) {
			fprintf(stderr,
				"rank %d: allreduce element %u is %d, expected %d\n",
				rank, i, sums[i], (int)(i * 6u) + 7);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	if (rank == 0)
		printf("mpi_pingpong: OK, %llu bytes each way verified, allreduce of %u ints verified\n",
		       verified, REDUCE_COUNT);
	free(buf);
	free(vals);
	free(sums);
	MPI_Finalize();
	return 0;
}
