/*
 * QEMU glue: trace a guest error as its kind's event (pvrdma_gerr_trace.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_GERR_TRACE_H
#define HW_PVRDMA_GERR_TRACE_H

#include "pvrdma_gerr.h"

void pvrdma_trace_guest_error(PvrdmaGerr kind, const PvrdmaGerrArg *a);

#endif /* HW_PVRDMA_GERR_TRACE_H */
