#!/usr/bin/env bash
# The GPU checks of the model backend and the headless lab worker, on a GPU machine with no network (the numbers in
# docs/deploy.md and docs/lab.md came from this script; its output is under bench/results/).
#
#   bash bench/gpu_backend.sh backend   # the backend on CUDA (bf16) against a class of 30 (BERT-base shape)
#   bash bench/gpu_backend.sh worker    # the thorough ALBERT preset, queued and trained by `python -m services.lab worker`
#   bash bench/gpu_backend.sh lab distil:6 mutransfer:9   # presets side by side, each with its own worker of N slots
#        and database, stopped after LIMIT seconds; every database is copied to $OUT/<preset>.db each minute (a run cut short keeps what finished),
#        so `bench/verdicts.py report GROUP` re-decides it here: DATABASE_URL=sqlite:///<preset>.db
#
# Packages the machine lacks travel as one archive of a site folder (.whl/site.tar.xz: gradio, sqlalchemy, alembic,
# transformers at the pinned versions, built with `pip install --target` for that machine's Python); results go to
# $OUT (or /tmp/bfe-gpu-out). The archive, made here for a Python 3.12 x86-64 machine (about 28 MB):
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl gradio==6.31.0 sqlalchemy==2.1.9 \
#     alembic==1.20.1 transformers==5.23.0 huggingface-hub==2.4.0 tokenizers==0.23.3
#   (delete the wheels of what the machine has: numpy, pandas, httpx, ...; then)
#   pip install --target /tmp/site312 --no-deps --only-binary=:all: --python-version 3.12 ... .whl/*.whl
#   rm -r /tmp/site312/gradio/templates/node /tmp/site312/gradio/media_assets
#   (cd /tmp/site312 && tar cf - . | xz -T2 -6) > .whl/site.tar.xz
set -uo pipefail
OUT=${OUT:-/tmp/bfe-gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ -f .whl/site.tar.xz ] && [ ! -d /tmp/site/gradio ]; then
  mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site
fi
if [ -d /tmp/site/sqlalchemy ]; then export PYTHONPATH=/tmp/site:$PWD; else export PYTHONPATH=$PWD; fi
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
W=$(mktemp -d)
case "${1:-backend}" in
  backend)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
    $PY -c "import torch, transformers, gradio, sqlalchemy; print('torch', torch.__version__, 'transformers', transformers.__version__, 'gradio', gradio.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no cuda')" | tee -a "$OUT/gpu.txt"
    $PY bench/backend.py gpu-model "$W/models" 2>&1 | grep -v shards
    BFE_MODEL_DIR=$W/models $PY bench/backend.py class --model bert-base-uncased --sessions "${SESSIONS:-30}" \
      --repeats "${REPEATS:-5}" --tokens 128 --device "${DEVICE:-cuda}" 2>&1 | tee "$OUT/backend-class-gpu.txt"
    ;;
  worker)
    BFE_MODEL_DIR=$W/lab DATABASE_URL=sqlite:///$W/lab.db $PY bench/verdicts.py presets albert \
      --budget "${BUDGET:-thorough}" --first-seed 20 --worker "${SLOTS:-10}" 2>&1 | tee "$OUT/verdicts-albert-worker-gpu.txt"
    ;;
  lab)
    shift
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
    snap() {  # an online copy (SQLite's backup API): consistent while the worker writes
      for db in "$W"/*.db; do [ -f "$db" ] && $PY -c "import os,sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]+'.tmp'); s.backup(d); d.close(); os.replace(sys.argv[2]+'.tmp', sys.argv[2])" "$db" "$OUT/$(basename "$db")"; done
    }
    (while sleep 60; do snap; done) & SNAP=$!
    for spec in "$@"; do
      p=${spec%%:*}; n=${spec##*:}
      BFE_MODEL_DIR=$W/$p DATABASE_URL=sqlite:///$W/$p.db timeout "${LIMIT:-3600}" $PY bench/verdicts.py presets "$p" --budget "${BUDGET:-gpu}" \
        --first-seed "${FIRST_SEED:-0}" --worker "$n" > "$OUT/verdicts-$p-${BUDGET:-gpu}-gpu.txt" 2>&1 &
    done
    wait $(jobs -p | grep -v "^$SNAP$")
    kill $SNAP; snap; ls -la "$OUT"
    ;;
esac
