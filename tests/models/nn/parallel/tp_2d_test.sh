#!/usr/bin/env bash
# 2D (SUMMA) tensor parallelism against the serial layers on a 2 x 2 grid (4 ranks) and a 3 x 3
# grid (9 ranks), and 2.5D (Tesseract) on 8 ranks (the 2 x 2 grid 2 deep), every case inside one
# launch each: the SUMMA products, Linear2D, LayerNorm2D and the MLP (TP_2D_RANKS), the other
# layers' twins (TP_2D_LAYERS_RANKS), and GPT, BERT and ViT (TP_2D_MODELS_RANKS, on 4 and 8 ranks). A rank left waiting in a collective (a node that did not run on
# a peer) ends the job after TESSERA_COMM_TIMEOUT_S seconds.
# Usage: tp_2d_test.sh TP_2D_RANKS TP_2D_LAYERS_RANKS TP_2D_MODELS_RANKS
set -u
source "$(dirname "$0")/../../../parallel/mpi_test_lib.sh"
export TESSERA_COMM_TIMEOUT_S=60
ranks=$1 layers=$2 models=$3
for n in 4 9 8; do
  mode=2d
  [ "$n" = 8 ] && mode=2.5d
  expect_pass "$n" 240 "tp $mode: all checks passed" "$ranks"
  grep -E "^tp $mode volume:" "$LOG"
  expect_pass "$n" 240 "tp $mode layers: all checks passed" "$layers"
done
expect_pass 4 300 "all checks passed on 2 x 2 ranks" "$models"
expect_pass 8 300 "tp 2.5d models: 9 GPT, BERT and ViT cases, all checks passed on 2 x 2 x 2 ranks" "$models"
finish
