#!/usr/bin/env bash
# The real-data results of docs/results.md, end to end through the commands.
#
#   bench/real_data.sh multi30k WORK_DIR     # Multi30k EN->DE (an hour of training)
#   bench/real_data.sh multi30k_fr WORK_DIR  # Multi30k EN->FR (an hour of training)
#   bench/real_data.sh wsj WORK_DIR          # parsing the WSJ sample (two runs side by side, an ensemble)
#   bench/real_data.sh reuse WORK_DIR        # warm starts: domain continuation and EN->FR -> EN->DE transfer
#   bench/real_data.sh multilingual WORK_DIR # one EN->{DE,FR} model (an hour of training)
#   taskset -c 0 bench/real_data.sh multi30k WORK_DIR  # the same hour on one core
#
# "An hour" is --train_minutes=60: t2t-trainer plans the steps from the rate
# it measures on this machine, so the schedule (warm-up, cool-down) ends
# within the hour on any CPU. The checkpoint is chosen on dev by training
# itself: the dev metric at every evaluation keeps the best in
# OUTPUT_DIR/best (BLEU on the first 500 val lines; bracket F1 on the first
# 100 dev trees).
#
# Multi30k: the registered problems (translate_ende_multi30k,
# translate_enfr_multi30k) read ../shared/data/multi30k/raw when it is there
# beside the repository, and download the release otherwise (WSJ needs
# ../shared/data/wsj_sample). Writes data, checkpoints,
# outputs and the scores into WORK_DIR; prints the scores at the end, after
# the machine's fingerprint (the speeds depend on it). Training and decoding
# use --mixed_precision=auto: bfloat16 where the machine computes it
# natively, float32 elsewhere, so the same command is the fast one anywhere.
set -euo pipefail
shopt -s inherit_errexit  # a failing command inside $(...) stops the script too
task=${1:?usage: bench/real_data.sh multi30k|multi30k_fr|wsj|reuse|multilingual WORK_DIR}
work=${2:?usage: bench/real_data.sh multi30k|multi30k_fr|wsj|reuse|multilingual WORK_DIR}
# The hour of training (T2T_REAL_DATA_MINUTES=1 tries a script out).
minutes=${T2T_REAL_DATA_MINUTES:-60}
shared=$(cd "$(dirname "$0")/../../shared/data" 2>/dev/null && pwd) || shared=""
mkdir -p "$work"

# The machine line (CPU, flags, GPUs, TF, matmul peaks: bench/fingerprint.py)
# and the precision, oneDNN and int8 decisions here (t2tlite.precision).
fingerprint() { python "$(dirname "$0")/fingerprint.py"; python -m t2tlite.precision; }

# The lowercased tokenized BLEU of a t2t-bleu output file.
bleu_of() {
  sed -n 's/^lowercased Moses-tokenized BLEU against .*: BLEU = \([0-9.]*\).*/\1/p' "$1"
}
better() { python -c "import sys; print(int(float(sys.argv[1]) > float(sys.argv[2])))" "$1" "$2"; }

# decoded_bleu RUN CORPUS SPLIT LANG CHECKPOINT ALPHA OUT [DECODER FLAG...]:
# decodes $work/SPLIT.en with RUN's CHECKPOINT (beam 4, ALPHA) into
# $work/OUT.out.LANG, scores it against $work/SPLIT.LANG and CORPUS's
# tokenized reference into $work/OUT.bleu.LANG.txt; prints its BLEU.
decoded_bleu() {
  local run=$1 corpus=$2 split=$3 lang=$4 checkpoint=$5 alpha=$6 out=$7
  shift 7
  t2t-decoder --output_dir="$run" --checkpoint_path="$checkpoint" "$@" \
      --decode_hparams="beam_size=4,alpha=$alpha,batch_size=64" \
      --decode_from_file="$work/$split.en" \
      --decode_to_file="$work/$out.out.$lang" >&2
  t2t-bleu --translation="$work/$out.out.$lang" --reference="$work/$split.$lang" \
      --tokenized_reference="$corpus/tok/$split.lc.norm.tok.$lang" \
      --language="$lang" > "$work/$out.bleu.$lang.txt"
  echo "$out $lang alpha $alpha" >&2; cat "$work/$out.bleu.$lang.txt" >&2
  bleu_of "$work/$out.bleu.$lang.txt"
}

# Multi30k EN->$1 (de or fr): datagen, an hour of transformer_multi30k (at
# most the recipe's 5,000 steps: on a fast machine the steps past them did
# not gain dev BLEU, and the hour's longer schedule cooled down later), the
# dev (val) BLEU behind the decoding choices, then test2016 once.
translation() {
  local lang=$1 problem data run corpus raw_flag=()
  problem=translate_en${lang}_multi30k
  data=$work/m30k_${lang}_data run=$work/m30k_${lang}_run
  # The release's layout (raw/, tok/): the shared copy, or the download.
  if [ -n "$shared" ] && [ -d "$shared/multi30k" ]; then
    corpus=$shared/multi30k raw_flag=(--raw_data_dir="$corpus/raw")
  else
    corpus=$data/tmp/multi30k
  fi
  /usr/bin/time -v t2t-trainer --problem="$problem" \
      --hparams_set=transformer_multi30k --data_dir="$data" "${raw_flag[@]}" \
      --generate_data \
      --output_dir="$run" --mixed_precision=auto --train_minutes="$minutes" \
      --train_steps=5000 \
      --schedule=train_and_evaluate --local_eval_frequency=1000 \
      --eval_decode_samples=500 \
      --save_checkpoints_secs=240 --keep_checkpoint_max=20 --random_seed=1 \
      2> "$work/m30k_${lang}_train.log"
  for f in val test_2016_flickr; do
    zcat "$corpus/raw/$f.en.gz" > "$work/$f.en"
    zcat "$corpus/raw/$f.$lang.gz" > "$work/$f.$lang"
  done
  # Dev (val) chooses, by lowercased tokenized BLEU: training's best
  # checkpoint (OUTPUT_DIR/best) or the average of the last 5 or 10 at alpha
  # 0.6 (the paper's), then alpha 0.6, 1.0 or 1.4 for that one. test2016 is
  # decoded once, with the choice.
  score() {  # score SPLIT CHECKPOINT ALPHA NAME; prints the tokenized BLEU
    decoded_bleu "$run" "$corpus" "$1" "$lang" "$2" "$3" "$1.$4"
  }
  local checkpoint=$run/best best_bleu best_ckpt=best best_alpha=0.6 bleu n alpha
  best_bleu=$(score val "$checkpoint" 0.6 best)
  for n in 5 10; do
    t2t-avg-checkpoints --output_dir="$run" --n=$n
    rm -rf "$run/averaged$n"  # a rerun replaces it
    mv "$run/averaged" "$run/averaged$n"
    bleu=$(score val "$run/averaged$n" 0.6 "avg$n")
    [ "$(better "$bleu" "$best_bleu")" = 1 ] && \
        best_bleu=$bleu best_ckpt=avg$n checkpoint=$run/averaged$n
  done
  for alpha in 1.0 1.4; do
    bleu=$(score val "$checkpoint" $alpha "$best_ckpt.alpha$alpha")
    [ "$(better "$bleu" "$best_bleu")" = 1 ] && best_bleu=$bleu best_alpha=$alpha
  done
  echo "chosen on dev: $best_ckpt, alpha $best_alpha (dev $best_bleu)" \
      | tee "$work/m30k_${lang}_choice.txt"
  score test_2016_flickr "$checkpoint" "$best_alpha" final > /dev/null
  cat "$work/test_2016_flickr.final.bleu.$lang.txt"
  fingerprint | tee -a "$work/test_2016_flickr.final.bleu.$lang.txt"
}

multi30k() { translation de; }
multi30k_fr() { translation fr; }

wsj() {
  local data=$work/wsj_data run1=$work/wsj_seed1 run2=$work/wsj_seed2
  local gold="$shared/wsj_sample/wsj_01[67]*.mrg"
  t2t-datagen --problem=parsing_wsj --data_dir="$data" \
      --raw_data_dir="$shared/wsj_sample" --vocab_size=4000
  # Two runs of the recipe (seeds 1 and 2) side by side, each on half of the
  # cores this script may use (both on the one core if there is only one),
  # each an hour at most and at most the recipe's 7,000 steps: the 3,396
  # training trees gain nothing from longer runs, and an ensemble of two
  # runs gains more than one run twice as fast (docs/results.md, "Two runs
  # and their ensemble").
  train() {  # train SEED CPUS
    /usr/bin/time -v taskset -c "$2" t2t-trainer --problem=parsing_wsj \
        --hparams_set=transformer_parsing_pointer --data_dir="$data" \
        --output_dir="$work/wsj_seed$1" --mixed_precision=auto \
        --train_minutes=60 --train_steps=7000 \
        --schedule=train_and_evaluate --local_eval_frequency=2000 \
        --eval_decode_samples=100 --save_checkpoints_secs=180 \
        --keep_checkpoint_max=10 --random_seed="$1" \
        2> "$work/wsj_train$1.log"
  }
  local cores half pid1 pid2
  read -ra cores <<< "$(python -c \
      'import os; print(*sorted(os.sched_getaffinity(0)))')"
  half=$(( (${#cores[@]} + 1) / 2 ))
  local first second
  first=$(IFS=,; echo "${cores[*]:0:half}")
  second=$(IFS=,; echo "${cores[*]:half}")
  # Each run in a process group of its own (set -m), so that a failed run
  # stops the other, trainer included, rather than leaving it orphaned.
  set -m
  train 1 "$first" & pid1=$!
  train 2 "${second:-$first}" & pid2=$!
  wait "$pid1" || { kill -- -"$pid2"; wait "$pid2" || true; exit 1; }
  wait "$pid2"
  set +m
  # parse_dev NAME [t2t-decoder flags]: dev's raw linearized outputs in
  # wsj_dev.NAME.txt, which t2t-parse-eval pairs with the gold words (and
  # repairs if needed), and their F1 in wsj_dev.NAME.f1.txt.
  parse_dev() {
    local name=$1; shift
    t2t-decoder --output_dir="$run1" "$@" \
        --decode_from_file="$data/parsing_wsj-dev.inputs.txt" \
        --decode_to_file="$work/wsj_dev.$name.txt"
    t2t-parse-eval --prediction="$work/wsj_dev.$name.txt" \
        --reference="$gold" | tee "$work/wsj_dev.$name.f1.txt"
  }
  # The problem's decoding (the paper's beam 21 and input + 300, alpha 0,
  # chosen on dev over the paper's 0.3): each run's best checkpoint alone,
  # then the two together (the recipe's result), constrained (the default)
  # and not.
  parse_dev seed1 --checkpoint_path="$run1/best"
  parse_dev seed2 --checkpoint_path="$run2/best"
  parse_dev ensemble_false --checkpoint_path="$run1/best,$run2/best" \
      --decode_hparams=constrained=false
  parse_dev ensemble --checkpoint_path="$run1/best,$run2/best"
  fingerprint | tee -a "$work/wsj_dev.ensemble.f1.txt"
}

# Warm starts on Multi30k (docs/fine_tuning.md), every run on one core,
# two at a time side by side, so that each pair compared shares the machine.
# The model is the suite's short recipe (transformer_tiny widened to d_model
# 128, 2,048 tokens a step: docs/results.md, "The short version in the test
# suite"), so that a run of minutes on one core learns:
#   1. parents, 15 minutes each: EN->FR and EN->DE on all of train, both on
#      one vocabulary trained over the English, German and French sides
#      (200 warm-up steps, a 400-step cool-down);
#   2. transfer, 10 minutes each: EN->DE on the first 3,000 pairs from scratch
#      against warm-started from the EN->FR parent (same vocabulary, same
#      hparams: 100 warm-up steps, a 200-step cool-down);
#   3. domain continuation, 5 minutes: the EN->DE parent fine-tuned on the
#      first 5,000 pairs (standing in for new in-domain data) at a tenth of
#      its rate after 50 warm-up steps, a 100-step cool-down.
# Every run keeps its dev-chosen checkpoint (OUTPUT_DIR/best: BLEU on the
# first 500 val lines); test2016 is decoded once for each, beam 4, alpha 0.6.
reuse() {
  local corpus=${shared:?reuse needs ../shared/data}/multi30k vocab=$work/vocab_en_de_fr.model
  # One BPE vocabulary of 8,000 pieces over the three train sides.
  [ -f "$vocab" ] || python - "$corpus/raw" "$vocab" <<'PY'
import gzip, itertools, sys
from t2tlite.data.vocab import train_sentencepiece
raw, path = sys.argv[1:]
def texts():
  for lang in ("en", "de", "fr"):
    with gzip.open(f"{raw}/train.{lang}.gz", "rt", encoding="utf-8") as f:
      yield from (line.rstrip("\n") for line in f)
print("vocabulary:", train_sentencepiece(texts, path, 8000), "pieces")
PY
  # slice N: a raw folder whose train split is the first N pairs.
  slice() {
    local dir=$work/raw_first$1
    mkdir -p "$dir"
    for lang in en de; do
      # sed reads to the end (head would end zcat by SIGPIPE, under pipefail).
      zcat "$corpus/raw/train.$lang.gz" | sed -n "1,$1p" | gzip > "$dir/train.$lang.gz"
      for f in val test_2016_flickr; do
        ln -sf "$corpus/raw/$f.$lang.gz" "$dir/$f.$lang.gz"
      done
    done
  }
  slice 3000; slice 5000
  local model=d_model=128,d_ff=512,d_k=32,d_v=32,batch_size=2048,max_length=64
  local parent_flags="--hparams=$model,learning_rate_scale=0.35,warmup_steps=200,learning_rate_cooldown_steps=400 --local_eval_frequency=300"
  local child_flags="--hparams=$model,learning_rate_scale=0.35,warmup_steps=100,learning_rate_cooldown_steps=200 --local_eval_frequency=150"
  # train NAME CORE LANG RAW_DIR MINUTES [t2t-trainer flags...]
  train() {
    local name=$1 core=$2 lang=$3 raw=$4 minutes=$5; shift 5
    [ -f "$work/$name/best/checkpoint" ] && return 0  # done in an earlier call
    /usr/bin/time -v taskset -c "$core" t2t-trainer \
        --problem="translate_en${lang}_multi30k" \
        --hparams_set=transformer_tiny --data_dir="$work/${name}_data" \
        --raw_data_dir="$raw" --generate_data --output_dir="$work/$name" \
        --mixed_precision=auto --train_minutes="$minutes" \
        --eval_decode_samples=500 --save_checkpoints_secs=240 \
        --random_seed=1 "$@" 2> "$work/$name.log"
  }
  # side_by_side "train ..." "train ...": two runs at once; a failure stops both.
  side_by_side() {
    set -m
    local pid1 pid2
    eval "$1" & pid1=$!
    eval "$2" & pid2=$!
    wait "$pid1" || { kill -- -"$pid2" 2>/dev/null; wait "$pid2" || true; exit 1; }
    wait "$pid2"
    set +m
  }
  side_by_side \
      "train enfr_parent 0 fr '$corpus/raw' 15 --vocab_from='$vocab' $parent_flags" \
      "train ende_parent 1 de '$corpus/raw' 15 --vocab_from='$vocab' $parent_flags"
  side_by_side \
      "train ende3k_scratch 0 de '$work/raw_first3000' 10 --vocab_from='$vocab' $child_flags" \
      "train ende3k_from_fr 1 de '$work/raw_first3000' 10 --warm_start_from='$work/enfr_parent/best' $child_flags"
  train ende_continued 0 de "$work/raw_first5000" 5 \
      --warm_start_from="$work/ende_parent/best" \
      --hparams="$model,learning_rate_scale=0.035,warmup_steps=50,learning_rate_cooldown_steps=100" \
      --local_eval_frequency=60
  # test2016, once for each run's dev-chosen checkpoint.
  for lang in de fr; do
    zcat "$corpus/raw/test_2016_flickr.en.gz" > "$work/test_2016_flickr.en"
    zcat "$corpus/raw/test_2016_flickr.$lang.gz" > "$work/test_2016_flickr.$lang"
  done
  local name lang
  for name in enfr_parent ende_parent ende_continued ende3k_scratch ende3k_from_fr; do
    lang=de; [ "$name" = enfr_parent ] && lang=fr
    t2t-decoder --output_dir="$work/$name" --checkpoint_path="$work/$name/best" \
        --decode_hparams="beam_size=4,alpha=0.6,batch_size=64" \
        --decode_from_file="$work/test_2016_flickr.en" \
        --decode_to_file="$work/$name.test_2016_flickr.$lang" 2> "$work/$name.decode.log"
    t2t-bleu --translation="$work/$name.test_2016_flickr.$lang" \
        --reference="$work/test_2016_flickr.$lang" \
        --tokenized_reference="$corpus/tok/test_2016_flickr.lc.norm.tok.$lang" \
        --language="$lang" > "$work/$name.test_2016_flickr.bleu.txt"
    echo "$name:"; cat "$work/$name.test_2016_flickr.bleu.txt"
  done | tee "$work/reuse_results.txt"
  fingerprint | tee -a "$work/reuse_results.txt"
}

# One model for EN->DE and EN->FR (docs/data.md, "Mixtures of problems"):
# the mixture of the two Multi30k problems, one 8,000-piece BPE vocabulary
# over English, German and French with the tags <2de> and <2fr>, examples
# drawn half and half (the members' sizes), the hour recipe's budget:
# transformer_multi30k, --train_minutes=60, its ceiling raised to 10,000
# steps (two corpora: the hour, not the 5,000 steps of one, bounds the
# run). best/ is kept on the mean dev BLEU of the two members (the first
# 500 val lines of each). Then, as the bilingual hours choose, but one
# model for both: best/ or the average of the last 5 or 10 checkpoints on
# the mean of the two dev (val) BLEUs at alpha 0.6, each language's alpha
# (0.6, 1.0 or 1.4) on its own dev BLEU, and test2016 decoded once per
# language, scored as the bilingual hours (lowercased tokenized BLEU).
multilingual() {
  local data=$work/m30k_multi_data run=$work/m30k_multi_run corpus raw_flag=()
  if [ -n "$shared" ] && [ -d "$shared/multi30k" ]; then
    corpus=$shared/multi30k raw_flag=(--raw_data_dir="$corpus/raw")
  else
    corpus=$data/tmp/multi30k
  fi
  /usr/bin/time -v t2t-trainer \
      --problem=translate_ende_multi30k+translate_enfr_multi30k \
      --hparams_set=transformer_multi30k --data_dir="$data" "${raw_flag[@]}" \
      --generate_data --output_dir="$run" --mixed_precision=auto \
      --train_minutes="$minutes" --train_steps=10000 \
      --schedule=train_and_evaluate --local_eval_frequency=1000 \
      --eval_decode_samples=500 --save_checkpoints_secs=240 \
      --keep_checkpoint_max=20 --random_seed=1 \
      2> "$work/m30k_multi_train.log"
  local lang f
  for f in val test_2016_flickr; do
    for lang in en de fr; do zcat "$corpus/raw/$f.$lang.gz" > "$work/$f.$lang"; done
  done
  score() {  # score SPLIT LANG CHECKPOINT ALPHA NAME; prints the tokenized BLEU
    decoded_bleu "$run" "$corpus" "$1" "$2" "$3" "$4" "$1.multi.$5" \
        --target_language="$2"
  }
  both() {  # both CHECKPOINT NAME; prints the mean dev BLEU at alpha 0.6
    python -c "import sys; print((float(sys.argv[1]) + float(sys.argv[2])) / 2)" \
        "$(score val de "$1" 0.6 "$2")" "$(score val fr "$1" 0.6 "$2")"
  }
  local checkpoint=$run/best best_ckpt=best best_mean mean n
  best_mean=$(both "$checkpoint" best)
  for n in 5 10; do
    t2t-avg-checkpoints --output_dir="$run" --n=$n
    rm -rf "$run/averaged$n"  # a rerun replaces it
    mv "$run/averaged" "$run/averaged$n"
    mean=$(both "$run/averaged$n" "avg$n")
    [ "$(better "$mean" "$best_mean")" = 1 ] && \
        best_mean=$mean best_ckpt=avg$n checkpoint=$run/averaged$n
  done
  echo "chosen on the mean dev BLEU: $best_ckpt (dev $best_mean)" \
      > "$work/m30k_multi_choice.txt"
  local alpha bleu best_bleu best_alpha
  for lang in de fr; do
    best_alpha=0.6 best_bleu=$(bleu_of "$work/val.multi.$best_ckpt.bleu.$lang.txt")
    for alpha in 1.0 1.4; do
      bleu=$(score val $lang "$checkpoint" $alpha "$best_ckpt.alpha$alpha")
      [ "$(better "$bleu" "$best_bleu")" = 1 ] && best_bleu=$bleu best_alpha=$alpha
    done
    echo "EN->${lang^^}: $best_ckpt, alpha $best_alpha (dev $best_bleu)" \
        >> "$work/m30k_multi_choice.txt"
    score test_2016_flickr $lang "$checkpoint" "$best_alpha" final > /dev/null
  done
  {
    cat "$work/m30k_multi_choice.txt"
    for lang in de fr; do
      cat "$work/test_2016_flickr.multi.final.bleu.$lang.txt"
    done
    # Each member's dev BLEU at every evaluation (the dev curves).
    grep -h '"bleu/' "$run/metrics.jsonl"
    fingerprint
  } | tee "$work/m30k_multi_results.txt"
}

"$task"
