"""Stand-in of the vLLM package, for kvtier tests only (see base.py)."""
