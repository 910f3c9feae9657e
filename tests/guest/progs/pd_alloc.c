/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Opens every RDMA device matching a name prefix, allocates and frees
 * protection domains from user space, and prints what it did. Exits
 * non-zero on any failure.
 *
 *   pd_alloc [DEVICE_PREFIX [COUNT]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	const char *prefix = argc > 1 ? argv[1] : "pvrdma";
	int count = argc > 2 ? atoi(argv[2]) : 4;
	struct ibv_device **list;
	int n, i, j, found = 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_context *ctx;
		struct ibv_pd **pds;

		if (strncmp(name, prefix, strlen(prefix)))
			continue;
		found++;
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			fprintf(stderr, "%s: ibv_open_device: %s\n", name,
				strerror(errno));
			return 1;
		}
		pds = calloc(count, sizeof(*pds));
		for (j = 0; j < count; j++) {
			pds[j] = ibv_alloc_pd(ctx);
			if (!pds[j]) {
				fprintf(stderr, "%s: ibv_alloc_pd #%d: %s\n",
					name, j, strerror(errno));
				return 1;
			}
			printf("%s: pd %d handle %u\n", name, j,
			       pds[j]->handle);
		}
		for (j = 0; j < count; j++) {
			if (ibv_dealloc_pd(pds[j])) {
				fprintf(stderr, "%s: ibv_dealloc_pd #%d failed\n",
					name, j);
				return 1;
			}
		}
		free(pds);
		if (ibv_close_device(ctx)) {
			fprintf(stderr, "%s: ibv_close_device failed\n", name);
			return 1;
		}
		printf("%s: allocated and freed %d PDs\n", name, count);
	}
	ibv_free_device_list(list);
	if (!found) {
		fprintf(stderr, "no RDMA device named %s*\n", prefix);
		return 1;
	}
	return 0;
}
