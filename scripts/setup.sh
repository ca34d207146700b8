#!/usr/bin/env bash
# Installs what is missing on Debian 12 (as root), then configures and builds tierzero in build/.
#   scripts/setup.sh          install what the programs need (Debian packages, the torch wheel) and
#                             build only the programs (`tierzero`, `tierzero-torch`): the main job
#   scripts/setup.sh --test   also install the test references (DeepSpeed, transformers, PEFT, ...),
#                             build everything, run every test (ctest), then build the fuzz harnesses
#                             (clang-14, build-fuzz/) and run each for 20 s; what CI runs
# Idempotent: with everything present it only (re)builds. LibTorch comes from the PyPI torch wheel,
# installed into the first python3 that already has it, else into a venv under ~/.cache/tierzero.
set -euo pipefail
cd "$(dirname "$0")/.."

run_tests=0
[[ "${1:-}" == "--test" ]] && run_tests=1

debian_packages=(
  build-essential cmake ninja-build pkg-config git python3 python3-venv python3-pip
  liburing-dev libaio-dev libtbb-dev libhwy-dev libzstd-dev libxxhash-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev fio libgloo-dev
  libpcre2-dev libutf8proc-dev
)
# The fuzz harnesses: clang-14 with libFuzzer and the sanitizer runtimes (only for --test).
((run_tests)) && debian_packages+=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

torch_version=2.11.0
python_packages=("torch==${torch_version}")
# The test references (only for --test): see the loop below.
((run_tests)) && python_packages+=(numpy safetensors transformers deepspeed tensorboard gguf accelerate peft)
has_torch() { "$1" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '${torch_version}')" 2>/dev/null; }
python=python3
if ! has_torch "$python"; then
  venv="${TIERZERO_VENV:-$HOME/.cache/tierzero/venv}"
  python="$venv/bin/python3"
  if ! has_torch "$python"; then
    echo "setup: installing ${python_packages[*]} into $venv (LibTorch comes from the torch wheel)"
    python3 -m venv "$venv"
    "$python" -m pip install -q --upgrade pip
    "$python" -m pip install -q "${python_packages[@]}"
  fi
fi
# The test references beside torch: safetensors and transformers (format and model parity),
# deepspeed (its zero_to_fp32 is the reference for the DeepSpeed import), tensorboard (its event
# reader checks `train --tensorboard`'s files), gguf (transformers reads llama.cpp's vocab GGUFs with
# it: the chat-template tests' real tokenizers), accelerate (transformers' HF Trainer DeepSpeed
# config, the reference for ds_config "auto", needs it), peft (the reference for tierzero.lora: its
# training, adapter directory and merged model).
for package in "${python_packages[@]:1}"; do
  "$python" -c "import $package" 2>/dev/null || "$python" -m pip install -q "$package"
done

# llama.cpp's Jinja engine (chat templates of chat JSONL rows) is built from llama-cpp-python's sdist on
# PyPI, cached here and never copied into the repository (cmake/FindLlamaCppJinja.cmake).
llama_sdist="$HOME/.cache/tierzero/llama_cpp_python-0.3.36.tar.gz"
[[ -f "$llama_sdist" ]] || "$python" -m pip download -q --no-deps --no-binary :all: -d "$(dirname "$llama_sdist")" \
  llama-cpp-python==0.3.36

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v "$python")" \
  -DTIERZERO_LLAMA_CPP_SDIST="$llama_sdist" > build.log 2>&1 \
  || { cat build.log; echo "setup: cmake configure failed (log above)"; exit 1; }
# The main job needs the two programs alone (tierzero hands train to tierzero-torch); the tests
# need everything.
if ((run_tests)); then
  cmake --build build --parallel "$(nproc)"
else
  cmake --build build --parallel "$(nproc)" --target tierzero tierzero-torch
fi

if ((run_tests)); then
  export TIERZERO_PYTHON="$(command -v "$python")" TIERZERO_NO_PROGRESS=1
  ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 600
  # Every reader of untrusted input under libFuzzer + ASan + UBSan, 20 s each from the committed
  # seeds (fuzz/README.md); a crash, leak or sanitizer report fails the run and keeps its input.
  cmake --preset fuzz > build-fuzz.log 2>&1 || { cat build-fuzz.log; echo "setup: fuzz configure failed"; exit 1; }
  cmake --build --preset fuzz --parallel "$(nproc)"
  fuzz/run_all.sh 20 build-fuzz build-fuzz/ci-work
fi
