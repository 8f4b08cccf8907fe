#!/usr/bin/env bash
# Wheels the GPU machine's image lacks (it has torch, triton, transformers, torchvision, pytest,
# pandas, tabulate), for Python 3.12 on x86_64, into .whl/ (git-ignored; carried to the device):
# hydra for config, diffusers for the sd35 capture, liger-kernel for its baseline, pytest-benchmark
# and pytest-xdist for the suite, and
# mlflow-skinny with SQLAlchemy and Alembic so `pytest suite/` can record to sqlite (22 MB), and
# flashinfer-python with apache-tvm-ffi for its baseline (17 MB; its other needs are on the image,
# and without nvidia-cutlass-dsl its norms take their CUDA JIT path). 47 MB in all.
# On the device: python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
#                export PYTHONPATH=/tmp/site:$PWD
set -eu
out=${1:-.whl}
mkdir -p "$out"
target=(--python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any)
pip download -q --no-deps "${target[@]}" -d "$out" hydra-core==1.3.8 omegaconf==2.3.1 diffusers==0.42.1 \
    liger-kernel==0.8.5 pytest-benchmark==5.3.1 py-cpuinfo pytest-xdist==3.8.0 execnet \
    flashinfer-python==0.6.12 apache-tvm-ffi==0.1.15.post2
pip download -q "${target[@]}" -d "$out" mlflow-skinny==3.17.2 sqlalchemy alembic
# antlr4-python3-runtime 4.9.3 (hydra's parser) exists only as an sdist: build its wheel here.
pip wheel -q --no-deps -w "$out" antlr4-python3-runtime==4.9.3
du -sh "$out"
