#!/usr/bin/env bash
# The shipped tiny model, built in stages like the real M2SA (docs/TRAINING.md):
#   data      m2sa-synth: the training world (seed 0) and a held-out world (seed 7, 320 px);
#             m2sa-overlap: no stage trains on an image an evaluation scores
#   stage 1   SAM promptable segmentation          training/tiny/1_sam.yaml
#   stage 1b  CLIP + projector: the words of each patch  training/tiny/1b_clip.yaml
#   stage 2   projector + language model (CLIP frozen)   training/tiny/2_language.yaml
#   stage 3   M2SA from the pretrained parts       training/tiny/3_m2sa.yaml
#   stage 3b  stage 3's mixture + commands about what is not there  training/tiny/3b_absent.yaml
#   eval      held-out splits, both protocols, R2SM and amodal (the last stage's model)
#   export    models/m2sa-tiny-synth (only with --export)
#
#   bash scripts/train_tiny.sh [--export] [key=value overrides for every stage, e.g. device=cuda]
#
# Resumable: run it again after an interruption; finished steps are skipped and an
# interrupted stage continues from its last checkpoint. Wall time per step goes to
# runs/tiny/timings.tsv. Set OMP_NUM_THREADS=1 when other processes share the cores.
# Environment: RUNS (default runs/tiny) keeps an experiment's stages apart, each stage
# starting from the one before it under the same RUNS; DATA and HELD are where the
# training and held-out worlds go (data/synth, data/heldout: the stage configs read
# data/synth); BIN is where the m2sa-* commands are (.venv/bin); STAGES the stages, in
# order (default "1_sam 1b_clip 2_language 3_m2sa", the shipped model's; each starts from the one
# before it; the evaluations wait for stage 3's model, or stage 3b's when STAGES names it, so
# STAGES=1_sam trains stage 1 alone; stage 3b is opt-in, STAGES="3_m2sa 3b_absent" after stage 3,
# until its recipe meets its targets: RUNS.md, runs 76 and 78);
# IMAGES the training world's size (default 2000: 1,600 training images, the shipped model's;
# training/tiny/research/RUNS.md run 27 trains on 8000). Stage 1b reads a larger world of its own,
# CLIP_DATA (default data/synth16k) at CLIP_IMAGES (default 16000) and CLIP_SEED (default 1): on
# 1,600 scenes alone CLIP learns which mug is the second by heart instead of by rule (RUNS.md,
# runs 27, 30 and 74); stage 3 (and 3b, which keeps its mixture) draws that world's part and
# several-instance questions too.
# Its seed is neither the training world's (0) nor the held-out world's (7): image k of a
# world is drawn from (seed, k), so a larger world of seed 0 holds the training world's val
# and test images in its own training split (RUNS.md, run 34).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
RUNS=${RUNS:-runs/tiny}
DATA=${DATA:-data/synth}
HELD=${HELD:-data/heldout}
STAGES=${STAGES:-1_sam 1b_clip 2_language 3_m2sa}
IMAGES=${IMAGES:-2000}
CLIP_DATA=${CLIP_DATA:-data/synth16k}
CLIP_IMAGES=${CLIP_IMAGES:-16000}
CLIP_SEED=${CLIP_SEED:-1}
TRAIN_SEED=0 HELD_SEED=7
if [[ $CLIP_SEED == "$TRAIN_SEED" || $CLIP_SEED == "$HELD_SEED" ]]; then
  echo "train_tiny.sh: CLIP_SEED=$CLIP_SEED is the training world's ($TRAIN_SEED) or the held-out world's" \
       "($HELD_SEED) seed: stage 1b would train on their val or test images; pick another" >&2
  exit 2
fi
EXPORT=0
if [[ "${1:-}" == "--export" ]]; then EXPORT=1; shift; fi
mkdir -p "$RUNS"

timed() {  # timed NAME COMMAND...: run, and record the wall time of this invocation
  local name=$1 start end; shift
  start=$(date +%s)
  "$@"
  end=$(date +%s)
  printf '%s\t%s\n' "$name" "$((end - start))" >> "$RUNS/timings.tsv"
}

# A world written by an older m2sa-synth lacks the files newer configs read, and one of
# another size or seed is another world: write it again. .complete holds how it was written
# (the training world's says only its size, as before seeds were recorded: its seed never changes).
world() {  # world NAME DIR IMAGES SEED: the world of that size and seed in DIR
  local name=$1 dir=$2 images=$3 seed=$4 needed stamp
  stamp="images=$images"
  [[ $seed == "$TRAIN_SEED" ]] || stamp="$stamp seed=$seed"
  for needed in $(grep -oh "$dir/[A-Za-z_]*\.json" training/tiny/*.yaml | sort -u); do
    [[ -f $needed ]] || rm -f "$dir/.complete"
  done
  if [[ "$(cat "$dir/.complete" 2>/dev/null)" != "$stamp" ]]; then
    rm -rf "$dir/images"
    timed "$name" "$BIN/m2sa-synth" --out "$dir" --images "$images" --seed "$seed" --quiet
    echo "$stamp" > "$dir/.complete"
  fi
}
# Stage 3b trains on the absent questions of the training world and is scored on the held-out
# world's: a world written before m2sa-synth asked them is written again (the same seed gives the
# same images and present questions, so the stages before 3b stay what they were).
absent_questions() {  # absent_questions FILE: false when FILE exists and asks none
  [[ ! -f $1 ]] || grep -q '"absent"' "$1"
}
if [[ " $STAGES " == *" 3b_absent "* ]]; then
  absent_questions "$DATA/MMR_train.json" || rm -f "$DATA/.complete"
  absent_questions "$HELD/MMR_test_mixed.json" || rm -f "$HELD/.complete"
fi
world data_train "$DATA" "$IMAGES" "$TRAIN_SEED"
if [[ " $STAGES " == *" 1b_clip "* || " $STAGES " == *" 3_m2sa "* || " $STAGES " == *" 3b_absent "* ]]; then  # the stages that read it
  world data_clip "$CLIP_DATA" "$CLIP_IMAGES" "$CLIP_SEED"
fi
if [[ ! -f $HELD/.complete ]]; then
  timed data_heldout "$BIN/m2sa-synth" --out $HELD --images 1000 --seed $HELD_SEED --size 320 --quiet
  touch $HELD/.complete
fi

# No stage may train on an image that an evaluation scores: the training world's val and test
# images and the held-out world's, compared byte for byte (training/overlap.py; RUNS.md, run 34).
SPLITS=($HELD/MMR_test_obj_only.json $HELD/MMR_test_part_only.json $HELD/MMR_test_mixed.json)
CONFIGS=() PENDING=0
for stage in $STAGES; do
  CONFIGS+=("training/tiny/$stage.yaml")
  [[ -f $RUNS/$stage/final/model.safetensors ]] || PENDING=1
done
if [[ $PENDING == 1 ]]; then  # every stage's data, since the last stage builds on all of them
  timed overlap_check "$BIN/m2sa-overlap" --quiet --config "${CONFIGS[@]}" --against "$DATA/MMR_val.json" \
    "$DATA/MMR_test_obj_only.json" "$DATA/MMR_test_part_only.json" "$DATA/MMR_test_mixed.json" "${SPLITS[@]}" \
    "$HELD/r2sm_test.json" "$HELD/amodal_reasonseg_test.json"
fi

# RANKS > 1 trains each stage as that many data-parallel processes (torchrun, gloo), each
# with batch_size / RANKS of the config's batch and $(nproc) / RANKS threads: every step sees
# the same samples as one process would (training/mixture.py, slots), and on two cores two
# one-thread ranks take 0.8x the time of one two-thread process (bench/RESULTS.md).
RANKS=${RANKS:-1}
train_stage() {  # train_stage CONFIG OVERRIDES...: m2sa-train, or RANKS processes under torchrun
  local config=$1 batch; shift
  if [[ $RANKS == 1 ]]; then
    "$BIN/m2sa-train" --config "$config" --resume "$@"
    return
  fi
  # The batch with the caller's overrides applied (training.config): an optim.batch_size= given on
  # the command line is the step's batch too, split like the config's.
  batch=$("$BIN/python" -c 'import sys; from training.config import load_config
print(load_config(sys.argv[1], sys.argv[2:]).optim.batch_size)' "$config" "$@")
  if (( batch % RANKS )); then
    echo "train_tiny.sh: $config's batch of $batch does not split into RANKS=$RANKS equal parts" >&2
    exit 2
  fi
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / RANKS > 1 ? $(nproc) / RANKS : 1 ))} \
    "$BIN/torchrun" --standalone --nproc-per-node "$RANKS" -m training.train --config "$config" --resume \
    "$@" "optim.batch_size=$((batch / RANKS))"
}

previous=""  # each stage starts from the one before it, under the same $RUNS
for stage in $STAGES; do
  if [[ ! -f $RUNS/$stage/final/model.safetensors ]]; then
    timed "$stage" train_stage "training/tiny/$stage.yaml" \
      "out_dir=$RUNS/$stage" ${previous:+"model.init_from=$RUNS/$previous/final"} "$@"
  fi
  previous=$stage
done

FINAL=3_m2sa
[[ " $STAGES " == *" 3b_absent "* ]] && FINAL=3b_absent
MODEL=$RUNS/$FINAL/final
if [[ ! -f $MODEL/model.safetensors ]]; then  # STAGES stopped before stage 3: nothing to score yet
  echo "[train_tiny] stages done: $STAGES; no $MODEL to evaluate yet (run again without STAGES to go on)"
  exit 0
fi
# The figures are the scored model's: another stage's go aside to $RUNS/scored/STAGE/, kept, and
# this one is scored (a RUNS scored before stage 3b existed scored stage 3).
scored=$(cat "$RUNS/scored_model" 2>/dev/null || echo "$RUNS/3_m2sa/final")
if [[ $scored != "$MODEL" ]]; then
  aside="$RUNS/scored/$(basename "$(dirname "$scored")")"
  mkdir -p "$aside"
  for old in "$RUNS"/eval_*; do
    if [[ -e $old ]]; then mv "$old" "$aside/"; fi
  done
fi
echo "$MODEL" > "$RUNS/scored_model"
for protocol in generative teacher-forced; do
  if [[ ! -f $RUNS/eval_$protocol.json ]]; then
    timed "eval_$protocol" "$BIN/m2sa-eval" --model $MODEL --data "${SPLITS[@]}" --image-root $HELD/images \
      --kind synthetic --protocol $protocol --out $RUNS/eval_$protocol.json
  fi
done
if [[ ! -f $RUNS/eval_r2sm.json ]]; then
  timed eval_r2sm "$BIN/m2sa-eval" --model $MODEL --data $HELD/r2sm_test.json --image-root $HELD/images \
    --kind r2sm --protocol generative --out $RUNS/eval_r2sm.json
fi
if [[ ! -f $RUNS/eval_amodal.json ]]; then
  timed eval_amodal "$BIN/m2sa-eval" --model $MODEL --data $HELD/amodal_reasonseg_test.json \
    --image-root $HELD/images --kind amodal_reasonseg --protocol generative --out $RUNS/eval_amodal.json
fi
if [[ $EXPORT == 1 ]]; then
  "$BIN/m2sa-export" --model $MODEL --out models/m2sa-tiny-synth
fi
echo "[train_tiny] done: $MODEL; figures in $RUNS/eval_*.json, wall times in $RUNS/timings.tsv"
