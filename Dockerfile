# BERT Family Explorer as a container: a Hugging Face Docker Space (sdk: docker, app_port: 8501) or any
# container host. Build: docker build -t bfe .   (GPU: --build-arg TORCH=cuda)   Run: docker run -p 8501:8501 bfe
# The Gradio widgets and API from the same image: docker run -p 7860:7860 bfe gradio   (or -e BFE_APP=gradio)
#
# BASE: any Debian-based image with Python 3.11 (python3 and its venv module).
ARG BASE=python:3.11-slim
FROM ${BASE}

# TORCH=cpu installs the CPU wheel (a much smaller image, for the free CPU tier); TORCH=cuda a CUDA build
# for GPU Spaces and GPU hosts, where the app then runs on the GPU (BFE_DEVICE=auto). An empty index
# leaves torch to pip's own configuration (e.g. PIP_FIND_LINKS with a local wheel).
ARG TORCH=cpu
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_CPU=https://download.pytorch.org/whl/cpu
ARG TORCH_INDEX_CUDA=https://download.pytorch.org/whl/cu128
# A folder of local wheels to prefer (mounted at build time), e.g. a CPU torch wheel on an offline mirror.
ARG WHEELS=

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# Chromium for server-side chart images (analysis.export: PNG/SVG, slide decks; kaleido drives it headless) and
# Noto fonts so Chinese, Japanese, Korean and emoji in titles and captions render instead of boxes.
# nginx (light): the proxy in front of one Streamlit replica per core (app/replicas.py, BFE_REPLICAS).
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-noto-core fonts-noto-cjk fonts-noto-color-emoji nginx-light \
    && rm -rf /var/lib/apt/lists/*
ENV BFE_CHROMIUM=/usr/bin/chromium

RUN python3 -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
RUN set -eu; \
    if [ "$TORCH" = cuda ]; then index="$TORCH_INDEX_CUDA"; elif [ "$TORCH" = cpu ]; then index="$TORCH_INDEX_CPU"; \
    else echo "TORCH must be cpu or cuda, not $TORCH" >&2; exit 2; fi; \
    pip install --upgrade pip; \
    if [ -n "$index" ]; then pip install "torch==$TORCH_VERSION" --index-url "$index"; fi; \
    pip install ${WHEELS:+--find-links "$WHEELS"} -r /tmp/requirements.txt; \
    python -c "import torch, streamlit, transformers; print('torch', torch.__version__)"; \
    if [ "$TORCH" = cpu ] && pip list 2>/dev/null | grep -qi '^nvidia-'; then echo "TORCH=cpu but CUDA libraries were installed" >&2; exit 3; fi

# Spaces run the container as uid 1000 with a writable home; /data is where persistent storage is mounted.
RUN useradd --create-home --uid 1000 user && mkdir -p /data && chown user /data
USER user
ENV HOME=/home/user \
    HF_HOME=/home/user/.cache/huggingface \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    GRADIO_ANALYTICS_ENABLED=False
WORKDIR /home/user/app
COPY --chown=user . .

EXPOSE 8501 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; g = os.environ.get('BFE_APP') == 'gradio'; urllib.request.urlopen('http://127.0.0.1:%s/%s' % (os.environ.get('PORT', '7860' if g else '8501'), 'gradio_api/info' if g else '_stcore/health'), timeout=4)"
ENTRYPOINT ["deploy/start.sh"]
