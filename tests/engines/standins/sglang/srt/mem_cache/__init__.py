"""Stand-in of the SGLang package, for kvtier tests only (see hicache_storage.py)."""
