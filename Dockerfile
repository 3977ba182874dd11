# The durable-agent worker image (also carries the CLI).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY durable_agent ./durable_agent
COPY workflows ./workflows
COPY activities ./activities
COPY worker.py ./
RUN pip install ".[postgres,gateway,otel]" && useradd --create-home agent
USER agent
ENTRYPOINT ["durable-agent"]
CMD ["worker"]
