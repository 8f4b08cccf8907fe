"""Chat models behind one interface: litellm providers and the embedded offline model."""

from harness.llm.base import ChatModel, Completion, ModelCallError, extract_code

__all__ = ["ChatModel", "Completion", "ModelCallError", "extract_code"]
