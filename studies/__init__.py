"""Measuring runs against each other: pass@k, entropy and diversity (`seedcast eval`), reports
(`seedcast compare`), parameter geometry, plots, and the GRPO baseline (`seedcast grpo`)."""
