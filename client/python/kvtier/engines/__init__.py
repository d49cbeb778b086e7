"""Engine-agnostic core of the engine connectors (kvtier.vllm, kvtier.sglang).

Nothing here imports torch, vLLM or SGLang: the adapters convert the engines'
types to these and back.

- block_keys: an engine's chained block hashes as kvtier keys and parents.
- kv_layout: where each engine block's bytes lie in the engine's KV tensors,
  from their shapes and strides.
- scheduler_state: which blocks to load and save, per step (scheduler side).
- worker_io: the loads and saves themselves, through a staging region
  (worker side), with failures turned into misses, never into exceptions.
"""
