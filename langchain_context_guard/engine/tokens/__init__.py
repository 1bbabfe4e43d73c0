"""How much: token counting, encodings and usage anchoring.

``_counters`` (``TiktokenCounter``: a per-message count, cached by identity and
content), ``_encodings`` and ``_offline`` (loading an encoding without the
network), ``_bpe`` (bpe-openai's encoder: tiktoken's counts, faster),
``_pieces`` (texts that share a head counted from shared pieces), ``_blocks``
and ``_cache_keys`` (what a message gives the tokenizer, and its cache key),
``_anchor`` (a history's figure anchored on the provider's own usage: the
``Gauge``). Imports only the engine's vocabulary (its root modules).
"""
