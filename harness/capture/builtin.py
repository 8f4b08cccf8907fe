"""The built-in models, built from their published hyperparameters with random weights (nothing
downloaded; weights do not change speed). Each returns `(model, example_inputs)` like any factory;
conf/capture/<name>.yaml names the builder and holds the serving settings."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import yaml

from harness.errors import ForgeBenchError
from harness.tasks import TASKS_ROOT


def _require(package: str, model: str) -> ModuleType:
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise ForgeBenchError(
            f"capture --model {model} needs {package}; install it or run on the GPU machine."
        ) from exc
    except Exception as exc:  # a wheel built for another torch fails on import with its own errors
        raise ForgeBenchError(
            f"capture --model {model} needs {package}, which is installed but fails to import "
            f"({type(exc).__name__}); install the build that matches torch {torch.__version__}."
        ) from exc


def _architecture(path: str) -> dict[str, Any]:
    """Hyperparameters from tasks/<model>/model.yaml (paths are relative to tasks/)."""
    return yaml.safe_load((TASKS_ROOT / Path(path)).read_text())


def resnet50(batch_size: int, image_size: int, device: torch.device, dtype: torch.dtype):
    """torchvision's ResNet-50 classifying a batch of images."""
    torchvision = _require("torchvision", "resnet50")
    with device:
        model = torchvision.models.resnet50(weights=None).to(dtype)
        images = torch.randn(batch_size, 3, image_size, image_size, dtype=dtype)
    return model, (images,)


class PrefillThenDecode(torch.nn.Module):
    """One batch of requests as a server runs them: prefill the prompts, then greedy decode steps,
    with logits for the last position only (as serving engines compute them). It returns every
    step's tokens, so a patched model is held to the same token at each step, and last the
    prefill's logits: their error against eager's tells a real difference from a token flipped
    between two nearly equal logits (frequent in a model of random weights, in bf16)."""

    def __init__(self, lm: torch.nn.Module, decode_steps: int):
        super().__init__()
        self.lm, self.decode_steps = lm, decode_steps

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.lm(input_ids=input_ids, use_cache=True, logits_to_keep=1)
        logits = out.logits[:, -1]
        tokens = [out.logits[:, -1:].argmax(-1)]
        for _ in range(self.decode_steps):
            out = self.lm(input_ids=tokens[-1], past_key_values=out.past_key_values, use_cache=True, logits_to_keep=1)
            tokens.append(out.logits[:, -1:].argmax(-1))
        return (*tokens, logits)


def causal_lm(
    name: str,
    config_class: str,
    architecture: str,
    batch_size: int,
    prefill_tokens: int,
    decode_steps: int,
    device: torch.device,
    dtype: torch.dtype,
    layers: int | None = None,
):
    """A transformers causal LM from `config_class(**tasks/<architecture>)`, built on the device.
    `layers` keeps the first that many decoder layers: each layer's calls keep their shapes, so the
    captured tasks still match, while a trace of the model (forgebench e2e) takes a fraction of the
    time. A whole number of the layer pattern's periods keeps its mix of layer kinds."""
    arch = _architecture(architecture)
    if layers is not None:
        if isinstance(layers, bool) or not isinstance(layers, int) or not 0 < layers <= arch["num_hidden_layers"]:
            raise ForgeBenchError(
                f"capture.workload.layers={layers!r}: give a whole number from 1 to {arch['num_hidden_layers']} "
                f"({name}'s layers), or null for all of them."
            )
        arch["num_hidden_layers"] = layers
    transformers = _require("transformers", name)
    if not hasattr(transformers, config_class):
        raise ForgeBenchError(
            f"capture --model {name} needs transformers with {config_class} "
            f"(this one is {transformers.__version__}); upgrade it."
        )
    config = getattr(transformers, config_class)(**arch)
    with device:
        lm = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
        prompts = torch.randint(0, config.vocab_size, (batch_size, prefill_tokens))
    return PrefillThenDecode(lm, decode_steps), (prompts,)


class TextToImage(torch.nn.Module):
    """SD3-style sampling: each step runs the transformer on the conditional and unconditional
    halves at once (classifier-free guidance) and takes an Euler step; then the VAE decodes."""

    def __init__(self, transformer: torch.nn.Module, vae: torch.nn.Module, steps: int, guidance: float):
        super().__init__()
        self.transformer, self.vae, self.steps, self.guidance = transformer, vae, steps, guidance

    def forward(self, latents, prompt_embeds, pooled_embeds):
        for step in range(self.steps):
            sigma = 1.0 - step / self.steps
            t = torch.full((2 * latents.shape[0],), sigma * 1000.0, device=latents.device, dtype=latents.dtype)
            noise = self.transformer(
                hidden_states=torch.cat([latents, latents]),
                encoder_hidden_states=prompt_embeds,
                pooled_projections=pooled_embeds,
                timestep=t,
                return_dict=False,
            )[0]
            uncond, cond = noise.chunk(2)
            latents = latents - (uncond + self.guidance * (cond - uncond)) / self.steps
        config = self.vae.config
        return self.vae.decode(latents / config.scaling_factor + config.shift_factor, return_dict=False)[0]


def sd35(
    architecture: str,
    images: int,
    resolution: int,
    prompt_tokens: int,
    steps: int,
    guidance: float,
    device: torch.device,
    dtype: torch.dtype,
):
    """Stable Diffusion 3.5's MMDiT transformer and VAE decoder (diffusers), text encoders left out:
    they run once per prompt, the transformer once per step."""
    diffusers = _require("diffusers", "sd35")
    arch = _architecture(architecture)
    with device:
        transformer = diffusers.SD3Transformer2DModel.from_config(arch["transformer"]).to(dtype)
        vae = diffusers.AutoencoderKL.from_config(arch["vae"]).to(dtype)
        side = resolution // 8  # the VAE downsamples by 8
        latents = torch.randn(images, arch["transformer"]["in_channels"], side, side, dtype=dtype)
        text = torch.randn(2 * images, prompt_tokens, arch["transformer"]["joint_attention_dim"], dtype=dtype)
        pooled = torch.randn(2 * images, arch["transformer"]["pooled_projection_dim"], dtype=dtype)
    return TextToImage(transformer, vae, steps, guidance), (latents, text, pooled)
