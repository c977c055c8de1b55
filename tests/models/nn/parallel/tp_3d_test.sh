#!/usr/bin/env bash
# 3D tensor parallelism against the serial math on a 2 x 2 x 2 cube (8 ranks), every case inside
# one launch: the cube and its activation layout, linear_3d, Linear3D, LayerNorm3D, a chain of
# them, the bytes per group and errors (TP_3D_RANKS); the classifier, patch embedding and
# classification head, and whole BERTs and ViTs (TP_3D_HEADS_RANKS). A rank left waiting in a
# collective (a node that did not run on a peer) ends the job after TESSERA_COMM_TIMEOUT_S seconds.
# Usage: tp_3d_test.sh TP_3D_RANKS TP_3D_HEADS_RANKS
set -u
source "$(dirname "$0")/../../../parallel/mpi_test_lib.sh"
export TESSERA_COMM_TIMEOUT_S=60
expect_pass 8 240 "tp 3d: all checks passed" "$1"
grep -E "^tp 3d volume:" "$LOG"
expect_pass 8 240 "tp 3d heads: all checks passed" "$2"
finish
