#!/usr/bin/env bash
# build-stock-driver.sh SERIES: the upstream vmw_pvrdma driver built for the
# guest kernel of SERIES (6.1 or 6.12), as the stock-driver tests build it
# (tests/guest/stockdrv.sh, cached in $PVRDMA_CACHE/stock-driver); prints
# the path of the module. scripts/prebuild.sh runs it ahead of the tests.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/stockdrv.sh"
[ $# -eq 1 ] || fail "usage: build-stock-driver.sh 6.1|6.12"
stockdrv_build "$1"
