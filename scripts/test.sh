#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh) and runs the whole test suite, Docker and browser tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
export IPYSKILLS_WITH_BROWSER="${IPYSKILLS_WITH_BROWSER:-1}"
bash scripts/setup.sh
# In CI, and wherever an engine answers, Docker tests must run: "engine unavailable" becomes a failure.
if [ "${CI:-}" = true ] || docker info >/dev/null 2>&1; then export IPYSKILLS_REQUIRE_DOCKER=1; fi
# setup.sh built the office profile image unless told not to: its tests must run then.
if [ "${IPYSKILLS_SKIP_OFFICE:-0}" != 1 ] && [ "${IPYSKILLS_REQUIRE_DOCKER:-0}" = 1 ]; then
    export IPYSKILLS_REQUIRE_OFFICE=1
fi
# setup.sh registered gVisor unless told not to (as root): its tests must run then.
if [ "${IPYSKILLS_SKIP_GVISOR:-0}" != 1 ] && [ "${IPYSKILLS_REQUIRE_DOCKER:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
    export IPYSKILLS_REQUIRE_GVISOR=1
fi
# Likewise in CI or with Chromium installed: the real-browser test (tests/browser) must run, not skip.
if [ "$IPYSKILLS_WITH_BROWSER" = 1 ] && { [ "${CI:-}" = true ] || [ -x /usr/bin/chromium ]; }; then
    export IPYSKILLS_REQUIRE_BROWSER=1
fi
mkdir -p artifacts
.venv/bin/python -m pytest -q -ra "$@"
# The attack lab, the limit measurements, files in and out and the pre-started interpreter once more under
# gVisor (about 3 min), when
# it is registered and the whole suite was asked for.
if [ "${IPYSKILLS_REQUIRE_GVISOR:-0}" = 1 ] && [ "$#" = 0 ]; then
    echo "== the same attacks and limits under gVisor (IPYSKILLS_TEST_RUNTIME=runsc)"
    IPYSKILLS_TEST_RUNTIME=runsc .venv/bin/python -m pytest -q -ra -p no:cacheprovider \
        tests/sandbox/test_docker_attacks.py tests/sandbox/test_limits_measured.py tests/sandbox/test_files_in_out.py \
        tests/sandbox/test_prestarted.py tests/sandbox/test_network_off.py
fi
