"""What is done: the pure passes, the trim's plan and fit, and the digest.

Each pass is a plain function that never mutates its input, callable on its
own: ``_sanitize``, ``_repair``, ``_truncate``, ``_compress``, ``_thinking``,
``_trim`` (its plan, ``_trim_plan.plan_cut``, from what ``_trim_costs`` weighs
each message at, ``_trim_sizes`` and ``_trim_units``; its fit, ``cut_to_fit``;
and ``trim_history``, the two for a caller, with ``trim_to_budget`` returning
its messages), ``_digest`` (``digest_trimmed``),
``_hygiene``; ``_images`` offloads old images (``ImageOffloadMiddleware``, not a
step of ``prepare``); ``_text`` cuts text for truncation and compression
(``_paged_reads``: a cut file read's marker names the lines cut); ``_setting``
is what a pruning runs at. The order and the reason for it are in
``engine._reference.reference_prune``, which calls them as plain calls;
``engine.incremental`` reuses and memoises them. Imports the vocabulary and
``tokens``, never ``incremental``.
"""
