#!/bin/sh
# Start the app in a container: `start.sh` or `start.sh streamlit` (port 8501), `start.sh gradio` (port 7860).
# Streamlit runs as one replica per core behind the image's nginx (app/replicas.py; BFE_REPLICAS=1: one process).
# Without an argument, BFE_APP (streamlit or gradio) picks: a Space sets it as a variable.
# When persistent storage is mounted at /data (a Space with storage, a volume), the results database,
# the model folder and Hugging Face's cache go there and survive restarts; settings given in the
# environment (DATABASE_URL, BFE_MODEL_DIR, HF_HOME) always win.
set -eu
if [ -d /data ] && [ -w /data ]; then
    mkdir -p /data/bfe/models /data/huggingface
    export DATABASE_URL="${DATABASE_URL:-sqlite:////data/bfe/results.db}"
    export BFE_MODEL_DIR="${BFE_MODEL_DIR:-/data/bfe/models}"
    if [ "${HF_HOME:-/home/user/.cache/huggingface}" = /home/user/.cache/huggingface ]; then
        export HF_HOME=/data/huggingface
    fi
fi
cd "$(dirname "$0")/.."
case "${1:-${BFE_APP:-streamlit}}" in
    streamlit)
        exec python -m app.replicas --port "${PORT:-8501}" --address 0.0.0.0 ;;
    gradio)
        exec python -m app.gradio_app --host 0.0.0.0 --port "${PORT:-7860}" ;;
    *)
        exec "$@" ;;
esac
