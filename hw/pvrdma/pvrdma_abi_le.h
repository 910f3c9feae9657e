/*
 * PVRDMA device core: converting the command, response and caps
 * structures between the device's little-endian layout and host order
 * (pvrdma_abi_le.c).  Each conversion is its own inverse.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_ABI_LE_H
#define HW_PVRDMA_ABI_LE_H

#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_dev_abi.h"

/*
 * A request in place: to host order (@to_host, right after the copy-in;
 * the command code is read after its own conversion) or back.
 */
void pvrdma_cmd_req_le(union pvrdma_cmd_req *req, bool to_host);
/* A response of command @cmd, @resp_len bytes, in place (either way). */
void pvrdma_cmd_resp_le(union pvrdma_cmd_resp *resp, uint32_t cmd,
                        uint32_t resp_len);
/* A CQE the device writes into a CQ ring, in place (either way). */
void pvrdma_cqe_le(struct pvrdma_cqe *cqe);
/* The caps the device writes into the DSR, in place (either way). */
void pvrdma_device_caps_le(struct pvrdma_device_caps *caps);

#endif /* HW_PVRDMA_ABI_LE_H */
