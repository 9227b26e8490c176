# syntax=docker/dockerfile:1
# Build the wheel in one stage, install it with the PostgreSQL driver in a slim runtime stage.
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2
COPY pyproject.toml README.md ./
COPY exchange ./exchange
COPY migrations ./migrations
RUN python -m build --wheel --outdir /dist

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    EXCHANGE_DATABASE_URL=sqlite:////data/exchange.db
COPY --from=build /dist /dist
RUN pip install --no-cache-dir "$(ls /dist/*.whl)[postgres]" && rm -rf /dist \
    && useradd --system --uid 10001 --home-dir /data exchange \
    && mkdir -p /data && chown exchange /data
USER exchange
WORKDIR /data
VOLUME ["/data"]
# Apply migrations explicitly before the first start: docker run … exchange migrate
ENTRYPOINT ["exchange"]
CMD ["run"]
