"""Shepherd's own small GRPO trainer, so the demo and tests supervise a real job writing NeMo RL's files."""
