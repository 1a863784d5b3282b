#!/usr/bin/env bash
# The real-data results of BUILD_NOTES.md, end to end through the commands.
#
#   bench/real_data.sh multi30k WORK_DIR     # EN->DE, 2,000 steps (about an hour here)
#   bench/real_data.sh wsj WORK_DIR          # parsing the WSJ sample (an hour of training)
#
# Reads ../shared/data (beside the repository); writes data, checkpoints,
# outputs and the scores into WORK_DIR; prints the scores at the end, after
# the machine's fingerprint (the speeds depend on it). Training and decoding
# use --mixed_precision=auto: bfloat16 where the machine computes it
# natively, float32 elsewhere, so the same command is the fast one anywhere.
set -euo pipefail
task=${1:?usage: bench/real_data.sh multi30k|wsj WORK_DIR}
work=${2:?usage: bench/real_data.sh multi30k|wsj WORK_DIR}
shared=$(cd "$(dirname "$0")/../../shared/data" && pwd)
mkdir -p "$work"

# The machine line of t2tlite.precision (CPU, flags, GPUs, TF, matmul peaks)
# and the precision auto picked here.
fingerprint() { python -m t2tlite.precision; }

multi30k() {
  local data=$work/m30k_data run=$work/m30k_small
  t2t-datagen --problem=translate_ende_wmt --data_dir="$data" \
      --raw_data_dir="$shared/multi30k/raw" --vocab_size=8000
  t2t-trainer --problem=translate_ende_wmt --hparams_set=transformer_small \
      --hparams="warmup_steps=800" --data_dir="$data" --output_dir="$run" \
      --train_steps=2000 --mixed_precision=auto \
      --schedule=train_and_evaluate --local_eval_frequency=500 \
      --save_checkpoints_secs=240 --keep_checkpoint_max=10 --random_seed=1
  t2t-avg-checkpoints --output_dir="$run" --n=5
  zcat "$shared/multi30k/raw/test_2016_flickr.en.gz" > "$work/test2016.en"
  zcat "$shared/multi30k/raw/test_2016_flickr.de.gz" > "$work/test2016.de"
  t2t-decoder --output_dir="$run" --checkpoint_path="$run/averaged" \
      --decode_hparams="beam_size=4,alpha=0.6,batch_size=64" \
      --decode_from_file="$work/test2016.en" \
      --decode_to_file="$work/test2016.out.de"
  t2t-bleu --translation="$work/test2016.out.de" \
      --reference="$work/test2016.de" \
      --tokenized_reference="$shared/multi30k/tok/test_2016_flickr.lc.norm.tok.de" \
      --language=de | tee "$work/test2016.bleu.txt"
  fingerprint | tee -a "$work/test2016.bleu.txt"
}

wsj() {
  local data=$work/wsj_data run=$work/wsj_parsing_small
  local gold="$shared/wsj_sample/wsj_01[67]*.mrg"
  t2t-datagen --problem=parsing_wsj --data_dir="$data" \
      --raw_data_dir="$shared/wsj_sample" --vocab_size=4000
  /usr/bin/time -v t2t-trainer --problem=parsing_wsj \
      --hparams_set=transformer_parsing_small --data_dir="$data" \
      --output_dir="$run" --mixed_precision=auto \
      --schedule=train_and_evaluate --local_eval_frequency=2000 \
      --save_checkpoints_secs=180 --keep_checkpoint_max=10 --random_seed=1 \
      2> "$work/wsj_train.log"
  t2t-avg-checkpoints --output_dir="$run" --n=5
  # The paper's decoding (beam 21, alpha 0.3, input + 300: the problem's
  # defaults), constrained (the default) and not; raw linearized outputs,
  # which t2t-parse-eval pairs with the gold words (and repairs if needed).
  for constrained in true false; do
    t2t-decoder --output_dir="$run" --checkpoint_path="$run/averaged" \
        --decode_hparams="constrained=$constrained" \
        --decode_from_file="$data/parsing_wsj-dev.inputs.txt" \
        --decode_to_file="$work/wsj_dev.$constrained.txt"
    t2t-parse-eval --prediction="$work/wsj_dev.$constrained.txt" \
        --reference="$gold" | tee "$work/wsj_dev.$constrained.f1.txt"
  done
  fingerprint | tee -a "$work/wsj_dev.true.f1.txt"
}

"$task"
