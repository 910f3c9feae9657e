// SPDX-License-Identifier: GPL-2.0
/*
 * MPI all-to-all with data verification, for any number of ranks (one per
 * VM in tests/guest/test-fabric4.sh).
 *
 * Rank 0 first gathers every rank's processor name and fails unless they
 * are all different (so that the job really spans that many hosts). Then,
 * for each block size from 1 byte to 1 MiB (x4 steps), ITERS rounds of
 * MPI_Alltoall: each rank fills the block for each destination from a
 * seed made of source, destination, size and round, and checks every byte
 * of the block from each source. Then MPI_Alltoallv with a different
 * length for every (source, destination) pair, blocks at odd offsets,
 * checked the same way, and an MPI_Allreduce of 64 Ki integers whose every
 * element is checked. Any mismatch names the collective, size, round,
 * source and offset and aborts with status 1. Rank 0 prints the bytes all
 * ranks verified and a final line "mpi_alltoall: OK ...".
 *
 *   mpi_alltoall [ITERS]    (default 3)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCK (1u << 20)
#define REDUCE_COUNT (1u << 16)

static int rank, nranks;

static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint32_t x = seed ^ (uint32_t)(i * 2654435761u);

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

static uint32_t seed_of(int src, int dst, size_t size, int iter)
{
	return (uint32_t)src * 0x9e3779b1u ^ (uint32_t)dst * 0x85ebca77u ^
	       (uint32_t)size * 131u ^ (uint32_t)iter * 0xc2b2ae3du;
}

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(seed, i);
}

static unsigned long long check(const char *what, const uint8_t *buf,
				size_t len, int src, size_t size, int iter)
{
	uint32_t seed = seed_of(src, rank, size, iter);

	for (size_t i = 0; i < len; i++) {
		if (buf[i] != pattern_byte(seed, i)) {
			fprintf(stderr,
				"rank %d: %s size %zu round %d: byte %zu from rank %d is 0x%02x, expected 0x%02x\n",
				rank, what, size, iter, i, src, buf[i],
				pattern_byte(seed, i));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	return len;
}

/* bytes rank src sends rank dst in the MPI_Alltoallv round */
static int vlen(int src, int dst)
{
	return 1000 + 4099 * src + 257 * dst;
}

static void *xmalloc(size_t len)
{
	void *p = malloc(len);

	if (!p) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

static void check_hosts(void)
{
	char name[MPI_MAX_PROCESSOR_NAME] = "", *names = NULL;
	int len;

	MPI_Get_processor_name(name, &len);
	if (rank == 0)
		names = xmalloc((size_t)nranks * MPI_MAX_PROCESSOR_NAME);
	MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names,
		   MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank != 0)
		return;
	printf("mpi_alltoall: %d ranks on", nranks);
	for (int i = 0; i < nranks; i++) {
		const char *ni = names + (size_t)i * MPI_MAX_PROCESSOR_NAME;

		printf(" %s", ni);
		for (int j = 0; j < i; j++) {
			if (!strcmp(ni, names + (size_t)j * MPI_MAX_PROCESSOR_NAME)) {
				printf("\n");
				fprintf(stderr,
					"mpi_alltoall: ranks %d and %d both run on %s\n",
					j, i, ni);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
		}
	}
	printf("\n");
	fflush(stdout);
	free(names);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 3;
	unsigned long long verified = 0, total = 0;
	int *scount, *sdisp, *rcount, *rdisp, *vals, *sums;
	uint8_t *sbuf, *rbuf;
	size_t vtotal;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks < 2 || iters < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np N>1 %s [ITERS>0]\n",
				argv[0]);
		MPI_Finalize();
		return 2;
	}
	check_hosts();
	sbuf = xmalloc((size_t)nranks * MAX_BLOCK);
	rbuf = xmalloc((size_t)nranks * MAX_BLOCK);

	for (size_t size = 1; size <= MAX_BLOCK; size *= 4) {
		double t0 = MPI_Wtime();

		for (int it = 0; it < iters; it++) {
			for (int d = 0; d < nranks; d++)
				fill(sbuf + d * size, size,
				     seed_of(rank, d, size, it));
			memset(rbuf, 0, nranks * size);
			MPI_Alltoall(sbuf, (int)size, MPI_BYTE, rbuf, (int)size,
				     MPI_BYTE, MPI_COMM_WORLD);
			for (int s = 0; s < nranks; s++)
				verified += check("alltoall", rbuf + s * size,
						  size, s, size, it);
		}
		if (rank == 0)
			printf("mpi_alltoall: %7zu bytes per pair x %d rounds, %.1f ms per round\n",
			       size, iters, (MPI_Wtime() - t0) * 1e3 / iters);
	}

	/* Alltoallv: every pair its own length, blocks packed back to back */
	scount = xmalloc(nranks * sizeof(int));
	sdisp = xmalloc(nranks * sizeof(int));
	rcount = xmalloc(nranks * sizeof(int));
	rdisp = xmalloc(nranks * sizeof(int));
	for (int i = 0, so = 1, ro = 3; i < nranks; i++) {
		scount[i] = vlen(rank, i);
		sdisp[i] = so;
		so += scount[i] + 1;
		rcount[i] = vlen(i, rank);
		rdisp[i] = ro;
		ro += rcount[i] + 1;
	}
	vtotal = (size_t)rdisp[nranks - 1] + rcount[nranks - 1];
	if ((size_t)sdisp[nranks - 1] + scount[nranks - 1] > vtotal)
		vtotal = (size_t)sdisp[nranks - 1] + scount[nranks - 1];
	if (vtotal > (size_t)nranks * MAX_BLOCK) {
		fprintf(stderr, "rank %d: too many ranks\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int it = 0; it < iters; it++) {
		for (int d = 0; d < nranks; d++)
			fill(sbuf + sdisp[d], scount[d],
			     seed_of(rank, d, 0, it + 1000));
		memset(rbuf, 0, vtotal);
		MPI_Alltoallv(sbuf, scount, sdisp, MPI_BYTE, rbuf, rcount,
			      rdisp, MPI_BYTE, MPI_COMM_WORLD);
		for (int s = 0; s < nranks; s++)
			verified += check("alltoallv", rbuf + rdisp[s],
					  rcount[s], s, 0, it + 1000);
	}

	vals = xmalloc(REDUCE_COUNT * sizeof(int));
	sums = xmalloc(REDUCE_COUNT * sizeof(int));
	for (unsigned int i = 0; i < REDUCE_COUNT; i++)
		vals[i] = (int)(i * 3u) + rank * 7;
	MPI_Allreduce(vals, sums, REDUCE_COUNT, MPI_INT, MPI_SUM,
		      MPI_COMM_WORLD);
	for (unsigned int i = 0; i < REDUCE_COUNT; i++) {
		int want = (int)(i * 3u) * nranks + 7 * nranks * (nranks - 1) / 2;

		if (sums[i] != want) {
			fprintf(stderr,
				"rank %d: allreduce element %u is %d, expected %d\n",
				rank, i, sums[i], want);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}

	MPI_Reduce(&verified, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
		   MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_alltoall: OK, %d ranks, %llu bytes verified by their receivers (alltoall 1 B - 1 MiB per pair, alltoallv), allreduce of %u ints verified\n",
		       nranks, total, REDUCE_COUNT);
	free(sbuf);
	free(rbuf);
	free(scount);
	free(sdisp);
	free(rcount);
	free(rdisp);
	free(vals);
	free(sums);
	MPI_Finalize();
	return 0;
}
