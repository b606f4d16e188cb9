# syntax=docker/dockerfile:1
# Build: static binaries, no cgo.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The commit (.git is not in the build context): docker build --build-arg
# REVISION=$(git rev-parse HEAD); docker-compose passes $REVISION.
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.buildRevision=${REVISION}" -o /out/poller ./cmd/poller \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/devchain ./cmd/devchain \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/webhook-receiver ./cmd/webhook-receiver

# Run: distroless, non-root, nothing but the binaries.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/poller /usr/local/bin/poller
COPY --from=build /out/devchain /usr/local/bin/devchain
COPY --from=build /out/webhook-receiver /usr/local/bin/webhook-receiver
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/poller"]
CMD ["run"]
