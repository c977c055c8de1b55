#!/usr/bin/env bash
# ZeRO through `mpirun -np N tessera train --set zero.stage=1|2|3`: stages 1-3 give stage 0's
# losses (1e-5 relative, from the metrics files) on 2 data ranks with gradient accumulation, in
# f32, f16 (dynamic loss scaling) and bf16, and under tensor parallelism (tp 2 x dp 2); stage 3's
# evaluation and end-of-run sample equal stage 0's (every rank gathers the parameters they read);
# stage-2 and stage-3 checkpoints resume under stage 0 and a stage-0 one under stages 2 and 3 with
# the uninterrupted run's next losses (f32 and bf16); stage 3's sharded build (the default: no
# rank holds the whole model) trains as the whole build does, bit for bit (f32 and bf16); a tp 2 x
# dp 2 stage-2 checkpoint resumes
# on dp 2; offload (masters and optimizer state on the host, stepped by the CPU Adam) gives the
# same losses under stages 1 and 3, the overlapped offload step (stages 2 and 3, stepping during
# backward) the step-after-backward's losses bit for bit, and so does parameter offload (static and
# auto placement, the auto run's device peak under its limit, and with in-step eviction under a
# limit too tight to keep chunks between steps); what is not available (offload without a stage,
# parameter offload below stage 3, placement keys without it, LAMB / LARS, stage 3's keys under
# another stage) is refused naming the key.
# Usage: zero_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
configs=$(realpath "$here/../../../tools/configs")
work=$TMPDIR/work
mkdir -p "$work"
# 2 micro-batches of 2 per rank on 2 ranks: gradient accumulation under ZeRO too.
common=(--config "$cfg" --set train.steps=20 --set train.sample_tokens=0 --set logging.log_every=1
        --set train.micro_batch_size=2)

# train NAME N PATTERN ARGS...: a run whose metrics go to $work/NAME.jsonl.
train() {
  local name=$1 n=$2 pattern=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/$name.jsonl" "$@"
  expect_ok "$name" "$pattern"
}

# after_training NAME: the last run's final evaluation and sample (timing and paths left out).
after_training() {
  sed -n '/^eval at step 20/,$p' "$LOG" | grep -vE "^(done:|checkpoint saved)" >"$work/$1.txt"
}
train s0 2 "micro-batch 2 per rank x 2 accumulation" --set checkpoint.dir="$work/ck-s0" \
  --set train.sample_tokens=16
after_training s0
train s1 2 "zero: stage 1 over 2 data ranks" --set zero.stage=1
train s2 2 "zero: stage 2 over 2 data ranks" --set zero.stage=2 --set checkpoint.dir="$work/ck-s2"
compare "stage 0 vs stage 1" "$work/s0.jsonl" "$work/s1.jsonl" 1e-5
compare "stage 0 vs stage 2" "$work/s0.jsonl" "$work/s2.jsonl" 1e-5
for stage in 1 3; do
  train "s$stage-offload" 2 "masters and optimizer state offloaded to host memory" \
    --set zero.stage=$stage --set zero.offload=true
  compare "stage 0 vs stage $stage with offload" "$work/s0.jsonl" "$work/s$stage-offload.jsonl" 1e-5
done

# The overlapped offload step (zero.overlap_step: the host steps each gradient range as soon as it
# is reduced, while backward goes on), with 10 KiB buckets so several reduce during backward, and
# clipping off (it needs every gradient first): stage 2's and 3's losses equal those of the same
# offloaded run stepping after backward, bit for bit.
for stage in 2 3; do
  ov=(--set zero.stage=$stage --set zero.offload=true --set train.grad_clip=0
      --set zero.bucket_mb=0.01)
  train "s$stage-offload-noclip" 2 "stepped there by the CPU Adam" "${ov[@]}"
  train "s$stage-overlap" 2 "stepped there by the CPU Adam range by range during backward" \
    "${ov[@]}" --set zero.overlap_step=true
  compare "stage $stage offload: the overlapped step vs the step after backward" \
    "$work/s$stage-offload-noclip.jsonl" "$work/s$stage-overlap.jsonl" 0
done
# Composed with the landed strategies, dropout off so that data-parallel layouts equal serial: the
# overlapped step under tp 2 x dp 2 (stage 2), pp 2 x dp 2 (stage 3) and sp 2 x dp 2 (stage 2)
# gives the serial run's losses.
solo=(--set train.grad_clip=0 --set model.dropout=0 --set model.attn_dropout=0 --set model.n_layers=2
      --set train.steps=10)
ovx=("${solo[@]}" --set zero.offload=true --set zero.overlap_step=true --set zero.bucket_mb=0.01
     --set parallel.data=2)
train overlap-serial 1 "done: 10 steps" "${solo[@]}"
train overlap-tp2dp2 4 "range by range during backward" "${ovx[@]}" --set zero.stage=2 \
  --set parallel.tensor.size=2
train overlap-pp2dp2 4 "range by range during backward" "${ovx[@]}" --set zero.stage=3 \
  --set parallel.pipeline.size=2
train overlap-sp2dp2 4 "range by range during backward" "${ovx[@]}" --set zero.stage=2 \
  --set parallel.sequence.size=2
for layout in tp2dp2 pp2dp2 sp2dp2; do
  compare "serial vs the overlapped offload step under $layout" "$work/overlap-serial.jsonl" \
    "$work/overlap-$layout.jsonl" 1e-5
done

# Parameter offload: stage 3's parameter shards in chunks (of 10 KiB here), all of them on the host
# (static), or placed after a warm-up step (auto) so that the device stays under a limit. The
# auto runs: one with room for every chunk, then one whose limit is that run's peak less half its
# chunk bytes, which must keep some chunks on the host and every step's device peak under the
# limit. All give stage 0's losses.
poff=(--set zero.stage=3 --set zero.offload=true --set zero.offload_params=true --set zero.chunk_mb=0.01)
train s3-params-static 2 "of them on the host (static)" "${poff[@]}"
compare "stage 0 vs stage 3 with parameter offload" "$work/s0.jsonl" "$work/s3-params-static.jsonl" 1e-5
train s3-params-auto-roomy 2 "now on the device" "${poff[@]}" --set zero.placement=auto \
  --set zero.device_memory_limit=1G
roomy=$(grep -o "chunk on the host; [0-9]* of [0-9]* chunks ([0-9.]* MiB)" "$LOG")
limit=$(python3 - "$work/s3-params-auto-roomy.jsonl" "$roomy" <<'PY'
import json, re, sys
peak = max(json.loads(l).get("peak_bytes", 0) for l in open(sys.argv[1]))
device_mib = float(re.search(r"\(([0-9.]+) MiB\)", sys.argv[2]).group(1))
print(int(peak - device_mib * 2**20 / 2))
PY
)
train s3-params-auto 2 "now on the device" "${poff[@]}" --set zero.placement=auto \
  --set zero.device_memory_limit="$limit"
placed=$(grep -o "; [0-9]* of [0-9]* chunks" "$LOG" | head -1)
compare "stage 0 vs stage 3 with auto placement" "$work/s0.jsonl" "$work/s3-params-auto.jsonl" 1e-5
if python3 - "$work/s3-params-auto.jsonl" "$limit" "$placed" <<'PY'
import json, re, sys
peaks = [json.loads(l)["peak_bytes"] for l in open(sys.argv[1]) if "peak_bytes" in json.loads(l)]
kept, total = map(int, re.search(r"([0-9]+) of ([0-9]+)", sys.argv[3]).groups())
ok = max(peaks) <= int(sys.argv[2]) and 0 < kept < total
print(f"peak {max(peaks)} bytes under the limit {sys.argv[2]}, {kept} of {total} chunks on the device")
sys.exit(0 if ok else 1)
PY
then echo "ok: auto placement keeps the device under its limit"
else fail "auto placement: the device peak or the chunk split is wrong ($placed, limit $limit)"; fi
mpi 2 60 "$tessera" train "${common[@]}" "${poff[@]}" --set zero.placement=auto \
  --set zero.device_memory_limit=100K
expect_error "a device limit below the warm-up's peak" "zero.device_memory_limit is 102400 bytes, but the first step used" 60
# In-step eviction: a limit 1 KiB above the warm-up's peak and the prefetch's headroom (the refused
# run above names it) leaves room for almost no chunk at the step's peak, so between steps the
# device keeps fewer copies than within each step, where copies are made while the activations
# leave room and the one read latest is dropped first; the device stays under the limit and the
# losses are stage 3's.
ahead=$(grep -o "prefetching needs up to [0-9]* more" "$LOG" | head -n 1 | grep -o "[0-9][0-9]*")
warm=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["peak_bytes"])' \
  "$work/s3-params-auto-roomy.jsonl")
tight=$((warm + ahead + 1024))
train s3-params-auto-tight 2 "now on the device" "${poff[@]}" --set zero.placement=auto \
  --set zero.device_memory_limit="$tight"
compare "stage 0 vs stage 3 with in-step eviction" "$work/s0.jsonl" "$work/s3-params-auto-tight.jsonl" 1e-5
if python3 - "$work/s3-params-auto-tight.jsonl" "$tight" <<'PY'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if "zero_copies_made" in r]
later = steps[1:]
ok = (len(later) >= 10 and max(r["peak_bytes"] for r in steps) <= int(sys.argv[2])
      and all(r["zero_copies_made"] > 0 and r["zero_copies_dropped"] > 0 for r in later)
      and all(r["zero_copy_bytes_between_steps"] < r["zero_copy_peak_bytes"] for r in later))
print(f"limit {sys.argv[2]}: peak {max(r['peak_bytes'] for r in steps)}, per step "
      f"{later[-1]['zero_copies_made']} copies made and dropped, "
      f"{later[-1]['zero_copied_bytes']} bytes, up to {later[-1]['zero_copy_peak_bytes']} held")
sys.exit(0 if ok else 1)
PY
then echo "ok: in-step eviction copies chunks within each step and stays under the limit"
else fail "in-step eviction: expected copies made and dropped in every step, fewer kept between steps, the peak under $tight"; fi

# Stage 3 with its evaluation and the end-of-run sample: both read the parameters, so every rank
# gathers them in step (a sample on rank 0 alone would hang); they print what stage 0 prints.
train s3 2 "built sharded (zero.sharded_init)" --set zero.stage=3 --set train.sample_tokens=16 \
  --set checkpoint.dir="$work/ck-s3"
after_training s3
compare "stage 0 vs stage 3" "$work/s0.jsonl" "$work/s3.jsonl" 1e-5
grep -q "^sample (temperature" "$work/s3.txt" && cmp -s "$work/s0.txt" "$work/s3.txt" &&
  echo "ok: stage 3's evaluation and sample equal stage 0's" ||
  fail "stage 3's evaluation and sample differ from stage 0's: $(diff "$work/s0.txt" "$work/s3.txt")"
# The fewest parameters kept gathered, and gathering three ahead: the same losses. No kernel keeps
# a pointer to a parameter past the gather of another (a released parameter's bytes are NaN).
train s3-k2 2 "zero: stage 3" --set zero.stage=3 --set zero.live_params=2 --set zero.prefetch=3
compare "stage 0 vs stage 3 (live_params 2, prefetch 3)" "$work/s0.jsonl" "$work/s3-k2.jsonl" 1e-5
# Stage 3 builds the model sharded by default (no rank holds it whole: each parameter leaves this
# rank's pieces as it is drawn); built whole and then sharded, it trains the same, bit for bit.
train s3-whole 2 "zero: stage 3" --set zero.stage=3 --set zero.sharded_init=false
grep -q "built sharded" "$LOG" && fail "zero.sharded_init false still built sharded" ||
  echo "ok: zero.sharded_init false builds the model whole"
compare "stage 3: sharded build vs whole build" "$work/s3.jsonl" "$work/s3-whole.jsonl" 0
# BERT (its MLM decoder tied to the word embeddings) and ViT, bf16, with their evaluations.
for model in bert vit; do
  small=(--config "$configs/$model-tiny.json" --set model.n_layers=2 --set model.d_model=32
         --set model.n_heads=2 --set model.mlp_hidden=64 --set train.steps=6 --set train.batch_size=8
         --set train.micro_batch_size=2 --set train.eval_every=3 --set train.eval_batches=2
         --set schedule.warmup_steps=2 --set optimizer.lr=1e-2 --set precision.dtype=bf16
         --set checkpoint.dir= --set logging.log_every=1)
  if [ "$model" = bert ]; then small+=(--set model.max_positions=32); else small+=(--set model.image_size=16); fi
  for stage in 0 3; do
    extra=()
    [ "$stage" = 3 ] && extra=(--set zero.stage=3 --set zero.live_params=2)
    mpi 2 300 "$tessera" train "${small[@]}" --set logging.metrics="$work/$model-s$stage.jsonl" "${extra[@]}"
    expect_ok "$model stage $stage" "step 6/6"
    grep "^eval at step" "$LOG" >"$work/$model-s$stage-eval.txt"
  done
  compare "$model: stage 0 vs stage 3 (live_params 2)" "$work/$model-s0.jsonl" "$work/$model-s3.jsonl" 1e-5
  cmp -s "$work/$model-s0-eval.txt" "$work/$model-s3-eval.txt" && [ -s "$work/$model-s3-eval.txt" ] &&
    echo "ok: $model: stage 3's evaluations equal stage 0's" ||
    fail "$model: stage 3's evaluations differ: $(diff "$work/$model-s0-eval.txt" "$work/$model-s3-eval.txt")"
done

for dtype in f16 bf16; do
  train "$dtype-s0" 2 "step 20/20" --set precision.dtype=$dtype --set checkpoint.dir="$work/ck-$dtype-s0"
  train "$dtype-s2" 2 "zero: stage 2" --set precision.dtype=$dtype --set zero.stage=2
  compare "$dtype: stage 0 vs stage 2" "$work/$dtype-s0.jsonl" "$work/$dtype-s2.jsonl" 1e-5
  train "$dtype-s3" 2 "zero: stage 3" --set precision.dtype=$dtype --set zero.stage=3 \
    --set checkpoint.dir="$work/ck-$dtype-s3"
  compare "$dtype: stage 0 vs stage 3" "$work/$dtype-s0.jsonl" "$work/$dtype-s3.jsonl" 1e-5
done
# The sharded build rounds each parameter to bf16 as it is drawn, as the whole build does after.
train bf16-s3-whole 2 "zero: stage 3" --set precision.dtype=bf16 --set zero.stage=3 \
  --set zero.sharded_init=false
compare "bf16 stage 3: sharded build vs whole build" "$work/bf16-s3.jsonl" "$work/bf16-s3-whole.jsonl" 0
train bf16-s1 2 "zero: stage 1" --set precision.dtype=bf16 --set zero.stage=1
compare "bf16: stage 0 vs stage 1" "$work/bf16-s0.jsonl" "$work/bf16-s1.jsonl" 1e-5

# ZeRO over the data group of a tp 2 x dp 2 layout.
train tp2dp2-s0 4 "tensor parallel: 1d over 2 ranks" --set parallel.tensor.size=2
train tp2dp2-s2 4 "zero: stage 2 over 2 data ranks" --set parallel.tensor.size=2 --set zero.stage=2 \
  --set checkpoint.dir="$work/ck-tp2dp2-s2"
compare "tp 2 x dp 2: stage 0 vs stage 2" "$work/tp2dp2-s0.jsonl" "$work/tp2dp2-s2.jsonl" 1e-5
train tp2dp2-s3 4 "zero: stage 3 over 2 data ranks" --set parallel.tensor.size=2 --set zero.stage=3
compare "tp 2 x dp 2: stage 0 vs stage 3" "$work/tp2dp2-s0.jsonl" "$work/tp2dp2-s3.jsonl" 1e-5

# Every strategy landed, combined: tp 2 with sequence parallelism x dp 2 x ZeRO stage 2 x gradient
# accumulation gives the single-process serial run's losses (f32; no dropout in tiny_gpt).
train serial 1 "step 20/20"
train all 4 "sequence parallel" --set parallel.tensor.size=2 \
  --set parallel.tensor.sequence_parallel=true --set zero.stage=2
compare "serial vs tp 2 + sequence parallel x dp 2 x ZeRO 2" "$work/serial.jsonl" "$work/all.jsonl" 1e-5

# Checkpoints hold the plain optimizer's state by parameter name: each resumes under the other.
resume() {  # resume NAME N CHECKPOINT_DIR ARGS...: steps 21-24 from the checkpoint at step 20
  local name=$1 n=$2 dir=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set train.steps=24 --set checkpoint.dir="$dir" \
    --set logging.metrics="$work/$name.jsonl" "$@"
  expect_ok "$name" "resumed from"
}
resume s0-from-s0 2 "$work/ck-s0"
cp -r "$work/ck-s2" "$work/ck-s2-copy"
resume s0-from-s2 2 "$work/ck-s2"
compare "next losses: stage-2 checkpoint under stage 0" "$work/s0-from-s0.jsonl" "$work/s0-from-s2.jsonl" 1e-5
rm -rf "$work/ck-s0/step-00000024"
resume s2-from-s0 2 "$work/ck-s0" --set zero.stage=2
compare "next losses: stage-0 checkpoint under stage 2" "$work/s0-from-s0.jsonl" "$work/s2-from-s0.jsonl" 1e-5
resume s1-from-s2 2 "$work/ck-s2-copy" --set zero.stage=1
compare "next losses: stage-2 checkpoint under stage 1" "$work/s0-from-s0.jsonl" "$work/s1-from-s2.jsonl" 1e-5
resume s0-from-s3 2 "$work/ck-s3"
compare "next losses: stage-3 checkpoint under stage 0" "$work/s0-from-s0.jsonl" "$work/s0-from-s3.jsonl" 1e-5
rm -rf "$work/ck-s0/step-00000024"
resume s3-from-s0 2 "$work/ck-s0" --set zero.stage=3
compare "next losses: stage-0 checkpoint under stage 3" "$work/s0-from-s0.jsonl" "$work/s3-from-s0.jsonl" 1e-5
# bf16: the checkpoint holds the f32 masters; stage 3 loads them into its shards (and the 16-bit
# compute shards follow) without ever holding the parameters whole.
cp -r "$work/ck-bf16-s0" "$work/ck-bf16-s0-copy"
resume bf16-s0-next 2 "$work/ck-bf16-s0" --set precision.dtype=bf16
resume bf16-s0-from-s3 2 "$work/ck-bf16-s3" --set precision.dtype=bf16
compare "bf16 next losses: stage-3 checkpoint under stage 0" "$work/bf16-s0-next.jsonl" \
  "$work/bf16-s0-from-s3.jsonl" 1e-5
resume bf16-s3-from-s0 2 "$work/ck-bf16-s0-copy" --set precision.dtype=bf16 --set zero.stage=3
compare "bf16 next losses: stage-0 checkpoint under stage 3" "$work/bf16-s0-next.jsonl" \
  "$work/bf16-s3-from-s0.jsonl" 1e-5
# The tp 2 x dp 2 stage-2 checkpoint holds the serial model and state by name: it resumes on dp 2
# under stage 0 as it resumes in its own layout (tensor parallelism changes the order of sums: 1e-4).
cp -r "$work/ck-tp2dp2-s2" "$work/ck-tp2dp2-s2-copy"
resume tp2dp2-s2-next 4 "$work/ck-tp2dp2-s2" --set parallel.tensor.size=2 --set zero.stage=2
resume dp2-s0-from-tp2dp2 2 "$work/ck-tp2dp2-s2-copy"
compare "next losses: tp 2 x dp 2 stage-2 checkpoint on dp 2 stage 0" "$work/tp2dp2-s2-next.jsonl" \
  "$work/dp2-s0-from-tp2dp2.jsonl" 1e-4

mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=2 --set zero.prefetch=2
expect_error "stage 3's prefetch under stage 2" "zero.prefetch is a ZeRO stage 3 setting" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=2 --set zero.sharded_init=true
expect_error "the sharded build under stage 2" "zero.sharded_init is a ZeRO stage 3 setting" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=1 --set zero.offload=true \
  --set optimizer.type=sgd
expect_error "offload with sgd" "optimizer.type sgd with zero.offload" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.offload=true
expect_error "offload without a stage" "zero.offload keeps the ZeRO optimizer's shards on the host, so it needs zero.stage 1, 2 or 3, got zero.stage 0" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=2 --set zero.offload=true \
  --set zero.offload_params=true
expect_error "parameter offload below stage 3" "expected zero.stage 3 and zero.offload true, got zero.stage 2 and zero.offload true" 30
for key in placement device_memory_limit chunk_mb; do
  mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=3 --set zero.$key=1
  expect_error "zero.$key without offload_params" "zero.$key places parameter chunks on the device or the host, so it needs zero.offload_params true" 30
done
mpi 2 60 "$tessera" train --config "$cfg" "${poff[@]}" --set zero.placement=auto
expect_error "auto without a limit" "zero.placement auto keeps the device under zero.device_memory_limit: expected a limit above 0" 30
mpi 2 60 "$tessera" train --config "$cfg" "${poff[@]}" --set zero.device_memory_limit=8Q
expect_error "a malformed limit" 'zero.device_memory_limit: expected a size such as "8G"' 30
ovc=(--config "$cfg" --set zero.offload=true --set zero.overlap_step=true)
mpi 1 30 "$tessera" train "${ovc[@]}" --set zero.stage=2
expect_error "the overlapped step with clipping" "before the global norm exists: expected train.grad_clip 0, got 1" 30
mpi 1 30 "$tessera" train "${ovc[@]}" --set zero.stage=1 --set train.grad_clip=0
expect_error "the overlapped step at stage 1" "expected zero.offload true and zero.stage 2 or 3, got zero.stage 1" 30
mpi 1 30 "$tessera" train "${ovc[@]}" --set zero.stage=2 --set train.grad_clip=0 \
  --set precision.dtype=f16
expect_error "the overlapped step with loss scaling" "expected precision.dtype f32 or bf16, got f16" 30
mpi 1 30 "$tessera" train --config "$cfg" --set zero.bucket_mb=1
expect_error "zero.bucket_mb without a stage" "zero.bucket_mb sizes the ZeRO optimizer's gradient buckets, so it needs zero.stage 1, 2 or 3" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=2 --set optimizer.type=lamb
expect_error "lamb under ZeRO" "optimizer.type lamb with zero.stage 2" 30
n=$(grep -c "optimizer.type lamb with zero.stage 2" "$LOG")
[ "$n" -eq 1 ] && echo "ok: the error is printed once" || fail "the error is printed $n times"
finish
