"""Reward functions (evaluators) and dataset loaders.

An evaluator maps (completion, reference) to a reward in [0, 1], or None when the sample cannot be
scored (for example, a reference that is not a number). Built-ins are listed in `registry.py`.
"""
