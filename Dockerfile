# syntax=docker/dockerfile:1
# memconsole container image. Build and run: docs/operations.md, "Docker".
#
#   docker build -t memconsole:0.1.0 .
#   docker build --build-arg MEMCONSOLE_SKIP_MODEL=1 -t memconsole:0.1.0 .   # no model download
#
# Nothing secret is baked in: SECRET_KEY, database passwords and encryption keys come from the
# environment when the container runs (the image refuses to start without SECRET_KEY).

# --- builder: the virtualenv, static files and the embedding model ------------------------------
FROM python:3.11-slim-bookworm@sha256:528257d48c1da0dcecc2e725d1ae34498d60c965f1241e39cd6a85a8859bdf84 AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# The runtime lock: every package pinned with its hashes (docs/operations.md, "Dependencies").
RUN python -m venv /opt/venv
COPY requirements.lock /tmp/requirements.lock
RUN /opt/venv/bin/pip install --require-hashes -r /tmp/requirements.lock

WORKDIR /app
COPY . /app

# Static files are collected with the production storage (hashed, compressed names). Settings need
# a SECRET_KEY to load: this throwaway value exists only for this one command, in no ENV of any
# layer; the running container gets its real key from the environment.
RUN MEMCONSOLE_ENV=production SECRET_KEY=build-only-throwaway-not-used-at-runtime \
    MEMCONSOLE_VAR_DIR=/tmp/build-var MEMCONSOLE_STATIC_ROOT=/app/staticfiles \
    /opt/venv/bin/python manage.py collectstatic --noinput -v 1 \
    && rm -rf /tmp/build-var

# Translations: compile the .po catalogues when the source tree has any.
RUN if find /app -name '*.po' -not -path '/app/staticfiles/*' | grep -q .; then \
        apt-get update && apt-get install -y --no-install-recommends gettext \
        && MEMCONSOLE_ENV=production SECRET_KEY=build-only-throwaway-not-used-at-runtime \
           MEMCONSOLE_VAR_DIR=/tmp/build-var /opt/venv/bin/python manage.py compilemessages \
        && rm -rf /tmp/build-var /var/lib/apt/lists/*; \
    fi

# The embedding model (all-MiniLM-L6-v2, ONNX), downloaded and checked against its pinned sha256
# by `manage.py fetch_model`. MEMCONSOLE_SKIP_MODEL=1 skips it: the container then uses the lexical
# fallback until a model folder is mounted at MEMCONSOLE_MODEL_DIR (the health check says so).
ARG MEMCONSOLE_SKIP_MODEL=0
RUN mkdir -p /opt/models \
    && if [ "$MEMCONSOLE_SKIP_MODEL" = "1" ]; then \
        echo "MEMCONSOLE_SKIP_MODEL=1: no embedding model in this image"; \
    else \
        MEMCONSOLE_ENV=production SECRET_KEY=build-only-throwaway-not-used-at-runtime \
        MEMCONSOLE_VAR_DIR=/tmp/build-var MEMCONSOLE_MODEL_DIR=/opt/models/all-MiniLM-L6-v2 \
        /opt/venv/bin/python manage.py fetch_model \
        && rm -rf /tmp/build-var; \
    fi

# --- runtime: slim Python, the venv, the code, a non-root user ----------------------------------
FROM python:3.11-slim-bookworm@sha256:528257d48c1da0dcecc2e725d1ae34498d60c965f1241e39cd6a85a8859bdf84 AS runtime

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ANONYMIZED_TELEMETRY=False \
    MEMCONSOLE_ENV=production \
    MEMCONSOLE_VAR_DIR=/var/lib/memconsole \
    MEMCONSOLE_STATIC_ROOT=/app/staticfiles \
    MEMCONSOLE_MODEL_DIR=/opt/models/all-MiniLM-L6-v2 \
    WEB_CONCURRENCY=1

RUN groupadd --system --gid 10001 memconsole \
    && useradd --system --uid 10001 --gid memconsole --home-dir /var/lib/memconsole \
       --shell /usr/sbin/nologin memconsole \
    && mkdir -p /var/lib/memconsole \
    && chown memconsole:memconsole /var/lib/memconsole \
    && chmod 0700 /var/lib/memconsole

# Code, venv and model belong to root and are read-only to the service user.
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /opt/models /opt/models
COPY --from=builder /app /app
WORKDIR /app

USER memconsole:memconsole

# SQLite database, embedded Chroma folder and any local state (CHROMA_PATH, var/ in a checkout).
VOLUME ["/var/lib/memconsole"]
EXPOSE 8000

# /readyz: 200 when the database and the vector index answer. It is exempt from the HTTPS
# redirect; the Host header is the first ALLOWED_HOSTS entry so that host validation passes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as r; h = next((x.strip().lstrip('.') for x in os.environ.get('ALLOWED_HOSTS', '').split(',') if x.strip() not in ('', '*')), 'localhost'); r.urlopen(r.Request('http://127.0.0.1:8000/readyz', headers={'Host': h}), timeout=4)"]

# Workers: WEB_CONCURRENCY (more than 1 needs CHROMA_HOST, a Chroma server); threads per worker:
# GUNICORN_THREADS. Migrations are a separate step (docs/operations.md, "Upgrading").
CMD ["gunicorn", "memconsole.wsgi", "--config", "python:memconsole.gunicorn_config", "--bind", "0.0.0.0:8000"]
