"""ForgeBench: build, check and time LLM-written kernels against PyTorch."""

import os

# litellm fetches its price map from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
