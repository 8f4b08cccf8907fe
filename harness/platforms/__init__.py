"""Platforms: how a candidate's kernels are built on a device, and what the prompt says about it."""

from harness.platforms.base import Platform

__all__ = ["Platform"]
