// SPDX-License-Identifier: GPL-2.0-only
/*
 * Command channel (spec §5.1): one command slot and one response slot,
 * one command outstanding at a time.
 *
 * The device is not trusted: ERR values, missing interrupts, stale or
 * mismatched responses all end as an error for the one command, never
 * as a crash.  Every request carries a fresh cookie in hdr.response that
 * the device echoes, so a late response to an earlier command cannot be
 * taken for the current one.
 */
#include <linux/jiffies.h>

#include "pvrdma.h"

/*
 * ERR holds 0 or a failure code; QEMU-style devices store a negative
 * errno there.  Pass small errnos through, map anything else to EIO so
 * the device cannot hand kernel-internal codes to user space.
 */
static int pvrdma_err_to_errno(u32 err)
{
	s32 val = (s32)err;

	if (val < 0 && val > -ERESTARTSYS)
		return val;
	return -EIO;
}

static const char *pvrdma_cmd_name(u32 cmd)
{
	static const char * const names[PVRDMA_CMD_MAX] = {
		[PVRDMA_CMD_QUERY_PORT] = "QUERY_PORT",
		[PVRDMA_CMD_QUERY_PKEY] = "QUERY_PKEY",
		[PVRDMA_CMD_CREATE_PD] = "CREATE_PD",
		[PVRDMA_CMD_DESTROY_PD] = "DESTROY_PD",
		[PVRDMA_CMD_CREATE_MR] = "CREATE_MR",
		[PVRDMA_CMD_DESTROY_MR] = "DESTROY_MR",
		[PVRDMA_CMD_CREATE_CQ] = "CREATE_CQ",
		[PVRDMA_CMD_RESIZE_CQ] = "RESIZE_CQ",
		[PVRDMA_CMD_DESTROY_CQ] = "DESTROY_CQ",
		[PVRDMA_CMD_CREATE_QP] = "CREATE_QP",
		[PVRDMA_CMD_MODIFY_QP] = "MODIFY_QP",
		[PVRDMA_CMD_QUERY_QP] = "QUERY_QP",
		[PVRDMA_CMD_DESTROY_QP] = "DESTROY_QP",
		[PVRDMA_CMD_CREATE_UC] = "CREATE_UC",
		[PVRDMA_CMD_DESTROY_UC] = "DESTROY_UC",
		[PVRDMA_CMD_CREATE_BIND] = "CREATE_BIND",
		[PVRDMA_CMD_DESTROY_BIND] = "DESTROY_BIND",
		[PVRDMA_CMD_CREATE_SRQ] = "CREATE_SRQ",
		[PVRDMA_CMD_MODIFY_SRQ] = "MODIFY_SRQ",
		[PVRDMA_CMD_QUERY_SRQ] = "QUERY_SRQ",
		[PVRDMA_CMD_DESTROY_SRQ] = "DESTROY_SRQ",
		[PVRDMA_CMD_MODIFY_MR] = "MODIFY_MR",
		[PVRDMA_CMD_QUERY_COUNTERS] = "QUERY_COUNTERS",
		[PVRDMA_CMD_ATTACH_MCAST] = "ATTACH_MCAST",
		[PVRDMA_CMD_DETACH_MCAST] = "DETACH_MCAST",
		[PVRDMA_CMD_CREATE_XRCD] = "CREATE_XRCD",
		[PVRDMA_CMD_DESTROY_XRCD] = "DESTROY_XRCD",
	};

	return cmd < PVRDMA_CMD_MAX && names[cmd] ? names[cmd] : "UNKNOWN";
}

/*
 * Wait for the response to the command carrying @cookie.  A wake-up
 * whose response slot does not (yet) hold that cookie is spurious, e.g.
 * the late interrupt of an earlier no-wait command: keep waiting.
 */
static int pvrdma_cmd_wait(struct pvrdma_dev *dev, u32 cmd, u64 cookie,
			   union pvrdma_cmd_resp *resp)
{
	struct pvrdma_cmd_resp_hdr *hdr = dev->resp_slot;
	unsigned long deadline = jiffies +
				 msecs_to_jiffies(PVRDMA_CMD_TIMEOUT_MS);
	unsigned long left;
	u32 ack;

	for (;;) {
		left = time_is_after_jiffies(deadline) ?
		       deadline - jiffies : 0;
		if (!wait_for_completion_timeout(&dev->cmd_done, left) &&
		    READ_ONCE(hdr->ack) == 0) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_CMD_TIMEOUT);
			pvrdma_err(dev, "%s timed out after %u ms\n",
				   pvrdma_cmd_name(cmd), PVRDMA_CMD_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		/* Re-arm before looking, so a response landing now wakes us. */
		reinit_completion(&dev->cmd_done);

		ack = READ_ONCE(hdr->ack);
		dma_rmb();
		if (ack && READ_ONCE(hdr->response) == cookie)
			break;
		if (ack)
			pvrdma_dbg(dev, "stale response ack %#x while waiting for %s\n",
				   ack, pvrdma_cmd_name(cmd));
		if (time_is_before_eq_jiffies(deadline)) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_CMD_TIMEOUT);
			pvrdma_err(dev, "%s: no matching response\n",
				   pvrdma_cmd_name(cmd));
			return -ETIMEDOUT;
		}
	}

	/*
	 * Check the copy the caller gets, not the slot: the device could
	 * rewrite the slot between the check and the copy.
	 */
	memcpy(resp, dev->resp_slot, sizeof(*resp));
	if (resp->hdr.ack != PVRDMA_CMD_ACK(cmd) ||
	    resp->hdr.response != cookie) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_CMD_BAD_RESP);
		pvrdma_err(dev, "%s: unexpected response code %#x\n",
			   pvrdma_cmd_name(cmd), resp->hdr.ack);
		return -EFAULT;
	}
	return 0;
}

/**
 * pvrdma_cmd_post() - run one device command
 * @dev: device
 * @req: request, zero-initialised by the caller except for hdr.cmd and
 *	 the command's own fields; hdr.response is set here
 * @resp: response buffer for commands that answer (spec §5.2 "waits"),
 *	  NULL for commands whose response the driver does not wait for
 *
 * Context: process context, may sleep up to PVRDMA_CMD_TIMEOUT_MS.
 *
 * Return: 0, or a negative errno: the device's ERR code, -ETIMEDOUT if
 * no response arrived, -EFAULT for a response with the wrong ack code.
 */
int pvrdma_cmd_post(struct pvrdma_dev *dev, union pvrdma_cmd_req *req,
		    union pvrdma_cmd_resp *resp)
{
	u32 cmd = req->hdr.cmd;
	u64 cookie;
	u32 err;
	int ret;

	mutex_lock(&dev->cmd_lock);

	cookie = ++dev->cmd_cookie;
	req->hdr.response = cookie;
	req->hdr.reserved = 0;

	/* Clear the response slot so that readiness can be detected. */
	memset(dev->resp_slot, 0, sizeof(union pvrdma_cmd_resp));
	memcpy(dev->cmd_slot, req, sizeof(*req));
	reinit_completion(&dev->cmd_done);

	/* writel() orders the slot writes before the doorbell. */
	pvrdma_reg_write(dev, PVRDMA_REG_REQUEST, 0);
	/* The device reports acceptance in ERR before the write completes. */
	mb();
	err = pvrdma_reg_read(dev, PVRDMA_REG_ERR);
	if (err) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_CMD_ERR);
		ret = pvrdma_err_to_errno(err);
		/* "Still in use" is the caller's to report, not an error. */
		if (ret == -EBUSY)
			pvrdma_dbg(dev, "%s: busy\n", pvrdma_cmd_name(cmd));
		else
			pvrdma_err(dev, "%s failed, device error %#x\n",
				   pvrdma_cmd_name(cmd), err);
		goto out_unlock;
	}

	ret = resp ? pvrdma_cmd_wait(dev, cmd, cookie, resp) : 0;

out_unlock:
	mutex_unlock(&dev->cmd_lock);
	return ret;
}

/**
 * pvrdma_dev_ctl() - issue a device control operation (spec §2 CTL)
 * @dev: device
 * @ctl: PVRDMA_DEVICE_CTL_*
 *
 * CTL reports through the same ERR register as commands, so it is
 * serialised with them.
 *
 * Return: 0, or a negative errno if ERR is non-zero afterwards.
 */
int pvrdma_dev_ctl(struct pvrdma_dev *dev, u32 ctl)
{
	u32 err;

	mutex_lock(&dev->cmd_lock);
	pvrdma_reg_write(dev, PVRDMA_REG_CTL, ctl);
	/* The device sets ERR for the CTL write before that write completes. */
	mb();
	err = pvrdma_reg_read(dev, PVRDMA_REG_ERR);
	mutex_unlock(&dev->cmd_lock);

	if (err) {
		dev_err_ratelimited(&dev->pdev->dev,
				    "control operation %u failed, device error %#x\n",
				    ctl, err);
		return pvrdma_err_to_errno(err);
	}
	return 0;
}

/**
 * pvrdma_cmd_irq_complete() - response interrupt (vector 0)
 * @dev: device
 */
void pvrdma_cmd_irq_complete(struct pvrdma_dev *dev)
{
	complete(&dev->cmd_done);
}
