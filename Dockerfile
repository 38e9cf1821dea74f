# The wamux binary on a small Debian image. Build: docker build -t wamux .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/wamux ./cmd/wamux

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/wamux --create-home wamux
COPY --from=build /out/wamux /usr/local/bin/wamux
USER wamux
WORKDIR /var/lib/wamux
ENV WAMUX_DATA_DIR=/var/lib/wamux
EXPOSE 8080
ENTRYPOINT ["wamux"]
CMD ["serve"]
