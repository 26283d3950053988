#!/usr/bin/env bash
# Builds kgate/kgate, kgate/etcd and kgate/nats-server FROM scratch from the
# static binaries in $BIN (make images builds them) into the local Docker
# engine. Each image gets a context with its one binary.
set -euo pipefail
cd "$(dirname "$0")"
bin=${BIN:-../../bin}
tag=${TAG:-latest}
for b in kgate etcd nats-server; do
	ctx=$(mktemp -d)
	cp "$bin/$b" "$ctx/"
	docker build -q -f "$b.Dockerfile" -t "kgate/$b:$tag" "$ctx"
	rm -rf "$ctx"
done
