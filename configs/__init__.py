"""The YAML configs that ship with Seedcast; `--config NAME` finds them (optimizer/shipped_configs.py)."""
