"""What is done: the pure passes and the trim plan.

Each pass is a plain ``list[BaseMessage] -> list[BaseMessage]`` function that
never mutates its input: ``_sanitize``, ``_repair``, ``_truncate``,
``_compress``, ``_thinking``, ``_trim`` (with its plan, ``_trim_plan``, and
the plan's inputs, ``_trim_sizes`` and ``_trim_units``), ``_digest``,
``_hygiene``; ``_text`` cuts
text for truncation and compression. The order and the reason for it are in
``engine._reference.reference_prune``. Imports the vocabulary and ``tokens``.
"""
