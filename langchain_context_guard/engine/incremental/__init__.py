"""How fast: the passes made incremental and cache-friendly.

Contract: whatever ``ContextGuard.prepare`` sends through this machinery equals
what ``engine._reference.reference_prepare`` gives for the same history and guard
(the plain passes, called in order), except where the stable prefix re-sends an
earlier prompt, itself a reference output, while it fits;
``tests/engine/test_reference.py`` holds it.

It only reuses and memoises the passes (``engine.passes``): nothing there
imports from here. Reading order: ``_steps`` (a pass over one history as a
``Step`` that can grow with it; ``_trim_step``, ``_strip_step`` and
``_digest_step`` are the passes that need their own: the trim's plan kept while
the history grows, around the same ``plan_cut`` and ``cut_to_fit``; the digest
kept while the cut stays), ``_order`` (the sequence ``_run.Run`` steps
through), ``_run`` (one call's passes, each grown from the previous call's
step or run in full), ``_prune`` (the tries of one pruning: the cost model's depth from
``_cost_model``, then the full budget, then no digest), ``_stable_prefix`` and
``_reuse`` (re-sending the previous prompt while it fits), ``_produced`` (the
prompt the history's replies came from, which signed reasoning is held to), then
what makes warm calls cheap: ``_read_history`` and ``_extends`` (is this the last
history, grown?), ``_first_run`` (counting a cold history in one batch), ``_release``
(letting go of rewrites no later cut can keep), ``_promote`` (what a pruning
keeps, moved out of the collector's way), ``_handover`` (a conversation handed
to another process). Imports the vocabulary, ``tokens`` and ``passes``.
"""
