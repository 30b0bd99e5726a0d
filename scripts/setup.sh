#!/usr/bin/env bash
# Sets up a machine for ipyskills from nothing, idempotently: system packages (when root on Debian/Ubuntu),
# a Docker engine, a virtualenv in .venv with the project installed, and the sandbox image.
# Environment: IPYSKILLS_SKIP_DOCKER=1 skips the engine and images (the local backend is used then);
# IPYSKILLS_SKIP_OFFICE=1 skips the office profile image; IPYSKILLS_SKIP_BUILD_IMAGE=1 the build image (made on
# first need then); IPYSKILLS_SKIP_GVISOR=1 the gVisor runtime (as root it is installed and registered).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

apt_install() {
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || { echo "apt-get not found; please install: ${missing[*]}"; return 1; }
    log "installing system packages: ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if [ "${IPYSKILLS_SKIP_DOCKER:-0}" != 1 ]; then
    apt_install docker.io debootstrap || echo "warning: could not install Docker; the local backend will be used"
    if command -v docker >/dev/null && ! docker info >/dev/null 2>&1; then
        log "starting the Docker engine"
        if command -v dockerd >/dev/null; then
            (as_root dockerd >/tmp/ipyskills-dockerd.log 2>&1 &) || true
            for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
        fi
        docker info >/dev/null 2>&1 || echo "warning: no Docker engine answers (see /tmp/ipyskills-dockerd.log)"
    fi
fi
# Rootless Podman (tests/sandbox/test_podman.py runs it as uid 1000): podman, and uidmap's newuidmap/newgidmap.
if [ "${IPYSKILLS_SKIP_PODMAN:-0}" != 1 ]; then
    apt_install podman uidmap || echo "warning: could not install podman/uidmap; the Podman tests will be skipped"
fi
if [ "${IPYSKILLS_WITH_BROWSER:-0}" = 1 ]; then
    apt_install chromium || echo "warning: could not install chromium; browser tests will be skipped"
fi

if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    python3 -m venv .venv
fi
log "installing ipyskills into .venv"
.venv/bin/python -m pip install -q --upgrade pip
extras="test"
[ "${IPYSKILLS_WITH_BROWSER:-0}" = 1 ] && extras="test,browser"
.venv/bin/python -m pip install -q -e ".[$extras]"

if [ "${IPYSKILLS_SKIP_DOCKER:-0}" != 1 ] && docker info >/dev/null 2>&1; then
    if .venv/bin/ipyskills sandbox status --json >/tmp/ipyskills-status.json 2>/dev/null \
        && grep -q '"image_present": true' /tmp/ipyskills-status.json \
        && grep -q '"image_current": true' /tmp/ipyskills-status.json; then
        log "sandbox image present and current"
    else
        log "building the sandbox image offline (debootstrap; a few minutes)"
        .venv/bin/ipyskills sandbox build --offline
    fi
    # The office profile (LibreOffice, poppler, pandoc, Node) for skills whose scripts call those programs.
    if [ "${IPYSKILLS_SKIP_OFFICE:-0}" != 1 ]; then
        .venv/bin/ipyskills sandbox status --json >/tmp/ipyskills-status.json 2>/dev/null || true
        if .venv/bin/python -c "import json,sys; o=json.load(open('/tmp/ipyskills-status.json'))['profiles']['office']; sys.exit(0 if o['present'] and o['current'] else 1)" 2>/dev/null; then
            log "office profile image present and current"
        else
            log "building the office profile image (LibreOffice 25, poppler, pandoc, tesseract, Node; about 2 minutes)"
            .venv/bin/ipyskills sandbox build --profile office --offline
        fi
    fi
    # gVisor (runsc from bookworm-backports) registered as the runtime ipyskills-runsc, for runtime runsc/auto.
    if [ "${IPYSKILLS_SKIP_GVISOR:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "gVisor runtime (ipyskills sandbox gvisor)"
        .venv/bin/ipyskills sandbox gvisor || echo "warning: gVisor could not be set up; runtime runsc is unavailable"
    fi
    # The build profile (gcc, g++, Python headers): packages without wheels are built from source there.
    # Provisioning makes it on first need anyway; made here so the first such run does not wait for it.
    if [ "${IPYSKILLS_SKIP_BUILD_IMAGE:-0}" != 1 ]; then
        .venv/bin/ipyskills sandbox status --json >/tmp/ipyskills-status.json 2>/dev/null || true
        if .venv/bin/python -c "import json,sys; o=json.load(open('/tmp/ipyskills-status.json'))['profiles']['build']; sys.exit(0 if o['present'] and o['current'] else 1)" 2>/dev/null; then
            log "build profile image present and current"
        else
            log "building the build profile image (gcc, g++, Python headers; under a minute)"
            .venv/bin/ipyskills sandbox build --profile build --offline
        fi
    fi
fi
log "setup done"
