"""Class 9, a softmax with a crude exp (a 6-term series after range reduction by 2^k: relative error
about 1e-3, ten thousand times eager's): its outputs average 4.9e-4, where a fixed atol of 1e-4
would pass it (appended to softmax_cpp.py)."""
# ruff: noqa: F821  (build comes from softmax_cpp.py, which this is appended to)

lib = build(exp="std::ldexp(1.0f + (v*1.4426950f - std::floor(v*1.4426950f))*0.6931472f*(1.0f + (v*1.4426950f - std::floor(v*1.4426950f))*0.6931472f*0.5f), (int)std::floor(v*1.4426950f))")
