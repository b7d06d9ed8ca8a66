#!/usr/bin/env bash
# Podman (rootful) beside the Docker engine, for the docker environment's tests on `--env-arg engine=podman`
# (plugins/agentcompass-docker/README.md, "Podman").
#
#   1. installs Debian's podman and catatonit (the `--init` Podman runs) when podman is missing,
#   2. writes /etc/containers/containers.conf.d/agentcompass.conf for Podman inside a container (this machine
#      kind): no CAP_SYS_RESOURCE, so a container may not get Podman's default rlimits (nofile and nproc
#      1048576; runc fails with `error setting rlimit type 7: operation not permitted`): the defaults become
#      this shell's hard limits; cgroupfs and a file event log, since no systemd runs here,
#   3. copies the Docker engine's `python:3.11-slim` into Podman's store (`docker save | podman load`; no
#      registry is reachable), tagged as Docker names it (docker.io/library/...).
# Idempotent: each step is skipped when its result is already there. Needs .ci/docker-up.sh first (the image).
# Usage: .ci/podman-up.sh   (as root, on Debian or Ubuntu)
set -euo pipefail

IMAGE_TAG="${AGENTCOMPASS_BASE_IMAGE:-python:3.11-slim}"
CONF=/etc/containers/containers.conf.d/agentcompass.conf

log() { printf 'podman-up: %s\n' "$*" >&2; }

if ! command -v podman >/dev/null 2>&1 || ! command -v catatonit >/dev/null 2>&1; then
  log "installing podman and catatonit from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.agentcompass-apt-updated ]; then
    apt-get update -qq >/dev/null && touch /tmp/.agentcompass-apt-updated
  fi
  apt-get install -y -qq --no-install-recommends podman catatonit >/dev/null
fi

if [ ! -f "$CONF" ]; then
  # Podman runs conmon (and so runc) with at most 32768 processes here: a larger default fails the same way.
  nproc=$(ulimit -Hu)
  [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
  nofile=$(ulimit -Hn)
  [ "$nofile" = unlimited ] && nofile=1048576
  mkdir -p "$(dirname "$CONF")"
  cat >"$CONF" <<EOF
# Written by agentcompass's .ci/podman-up.sh: rootful Podman inside a container without CAP_SYS_RESOURCE.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  log "wrote $CONF"
fi
log "podman: $(podman version --format '{{.Client.Version}}')"

if ! podman image exists "$IMAGE_TAG"; then
  log "copying $IMAGE_TAG from the Docker engine"
  docker save "$IMAGE_TAG" | podman load >/dev/null 2>&1
  loaded="localhost/$IMAGE_TAG"
  podman tag "$loaded" "docker.io/library/$IMAGE_TAG"
  podman untag "$loaded" "$loaded" 2>/dev/null || true
fi
log "base image: $IMAGE_TAG ($(podman image inspect --format '{{.Id}}' "$IMAGE_TAG"))"
