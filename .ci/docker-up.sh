#!/usr/bin/env bash
# Bring up a Docker engine and an offline base image on this machine kind.
#
# This machine kind ships only the docker client and no container registry is
# reachable, so this script:
#   1. installs Debian's docker.io (engine) when dockerd is missing,
#   2. starts dockerd in the background when no engine answers,
#   3. builds a local `python:3.11-slim` image (Debian bookworm + python3,
#      via debootstrap) when that tag is missing, so Dockerfiles that say
#      `FROM python:3.11-slim` build and `docker run python:3.11-slim` works
#      with no pull.
# Idempotent: each step is skipped when its result is already there.
# Usage: .ci/docker-up.sh        (as root, on Debian or Ubuntu; prints what it did). Elsewhere install an
# engine as Docker documents it: https://docs.docker.com/engine/install/
set -euo pipefail

IMAGE_TAG="${AGENTCOMPASS_BASE_IMAGE:-python:3.11-slim}"
CACHE_DIR="${AGENTCOMPASS_CI_CACHE:-/var/cache/agentcompass-ci}"
LOG=/tmp/agentcompass-dockerd.log

log() { printf 'docker-up: %s\n' "$*" >&2; }

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.agentcompass-apt-updated ]; then
    apt-get update -qq >/dev/null && touch /tmp/.agentcompass-apt-updated
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

engine_up() { docker info >/dev/null 2>&1; }

if ! engine_up; then
  if ! command -v dockerd >/dev/null 2>&1; then
    log "installing docker.io (engine) from Debian's packages"
    apt_install docker.io
  fi
  log "starting dockerd (log: $LOG)"
  driver=overlay2
  grep -qw overlay /proc/filesystems || driver=vfs
  setsid dockerd --storage-driver="$driver" >"$LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    engine_up && break
    sleep 1
  done
  engine_up || { log "dockerd did not come up; see $LOG"; tail -n 20 "$LOG" >&2; exit 1; }
fi
log "engine: $(docker version --format '{{.Server.Version}}')"

if ! docker image inspect "$IMAGE_TAG" >/dev/null 2>&1; then
  mkdir -p "$CACHE_DIR"
  tarball="$CACHE_DIR/bookworm-python3-rootfs.tar"
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null 2>&1 || { log "installing debootstrap"; apt_install debootstrap; }
    root=$(mktemp -d)
    log "debootstrapping Debian bookworm + python3 into $root (about a minute)"
    # the machine's own Debian mirror, as apt is configured here
    sources=()
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] && sources+=("$f")
    done
    mirror=$(awk '/^(URIs:|deb)[ \t]/ && $2 ~ /\/debian\/?$/ {print $2; exit}' "${sources[@]}" 2>/dev/null || true)
    [ -n "$mirror" ] || { log "no Debian mirror found in the apt sources"; exit 1; }
    debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$root" \
      "$mirror" >"$CACHE_DIR/debootstrap.log" 2>&1 \
      || { log "debootstrap failed; see $CACHE_DIR/debootstrap.log"; exit 1; }
    rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  log "importing $tarball as $IMAGE_TAG"
  docker import --change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8' "$tarball" "$IMAGE_TAG" >/dev/null
fi
log "base image: $IMAGE_TAG ($(docker image inspect --format '{{.Size}}' "$IMAGE_TAG") bytes)"
