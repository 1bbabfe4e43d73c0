"""Replay: run real transcripts through every strategy and measure what they keep.

``_transcripts`` reads agent transcripts (mini-swe-agent trajectories, LangChain
message dumps, OpenAI chat JSONL); ``_strategies`` are the strategies compared
(the guard, ``trim_messages``, LangChain's summarisation and context editing),
``_summarizer`` the scripted summary model whose calls the loop bills;
``_loop`` replays each call; ``_metrics`` and ``_results`` measure and tabulate;
``_signed`` gives every reply signed thinking and checks each prompt as a model
that binds it would; ``_plot`` draws (needs the ``plot`` extra). Names load on
first use. A library:
its command line (``context-guard replay``) is the CLI's. Imports the engine and
``compaction``; never imported by them.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._loop import (
        WINDOWS as WINDOWS,
    )
    from ._loop import (
        replay as replay,
    )
    from ._metrics import (
        CACHE_RATE as CACHE_RATE,
    )
    from ._metrics import (
        COUNTERS as COUNTERS,
    )
    from ._metrics import (
        billed_input as billed_input,
    )
    from ._metrics import (
        cached_prefix as cached_prefix,
    )
    from ._metrics import (
        evidence as evidence,
    )
    from ._metrics import (
        from_history as from_history,
    )
    from ._metrics import (
        identifiers as identifiers,
    )
    from ._metrics import (
        message_key as message_key,
    )
    from ._metrics import (
        message_text as message_text,
    )
    from ._metrics import (
        percentile as percentile,
    )
    from ._metrics import (
        strip_notes as strip_notes,
    )
    from ._metrics import (
        tool_pairing_errors as tool_pairing_errors,
    )
    from ._needles import (
        DISTANCES as DISTANCES,
    )
    from ._needles import (
        Needle as Needle,
    )
    from ._needles import (
        ask_plan as ask_plan,
    )
    from ._needles import (
        needles_in as needles_in,
    )
    from ._plot import (
        plot_replay as plot_replay,
    )
    from ._plot import (
        plot_tradeoff as plot_tradeoff,
    )
    from ._results import (
        ReplayResult as ReplayResult,
    )
    from ._results import (
        Tally as Tally,
    )
    from ._results import (
        format_table as format_table,
    )
    from ._strategies import (
        STRATEGIES as STRATEGIES,
    )
    from ._strategies import (
        ContextEditing as ContextEditing,
    )
    from ._strategies import (
        Guard as Guard,
    )
    from ._strategies import (
        GuardCompaction as GuardCompaction,
    )
    from ._strategies import (
        Prompt as Prompt,
    )
    from ._strategies import (
        StickyCut as StickyCut,
    )
    from ._strategies import (
        StickyCutNewest as StickyCutNewest,
    )
    from ._strategies import (
        Strategy as Strategy,
    )
    from ._strategies import (
        Summarization as Summarization,
    )
    from ._strategies import (
        TrimMessages as TrimMessages,
    )
    from ._strategies import (
        available_strategies as available_strategies,
    )
    from ._strategies import (
        default_reserve as default_reserve,
    )
    from ._strategies import (
        make_strategies as make_strategies,
    )
    from ._summarizer import (
        PROVIDER as PROVIDER,
    )
    from ._summarizer import (
        ScriptedSummarizer as ScriptedSummarizer,
    )
    from ._summarizer import (
        SummaryCall as SummaryCall,
    )
    from ._timing import (
        GapModel as GapModel,
    )
    from ._timing import (
        seconds as seconds,
    )
    from ._transcripts import (
        TRAJECTORIES_ENV_VAR,
        TranscriptError,
        load_trajectories,
        load_transcript,
        provider_prompt_tokens,
        shared_multitool_dir,
        shared_trajectory_dir,
        trajectory_to_messages,
    )
    from ._transcripts import (
        load_paths as load_paths,
    )

__getattr__ = lazy_getattr(
    __name__,
    {
        "CACHE_RATE": "._metrics",
        "COUNTERS": "._metrics",
        "DISTANCES": "._needles",
        "PROVIDER": "._summarizer",
        "STRATEGIES": "._strategies",
        "WINDOWS": "._loop",
        "ContextEditing": "._strategies",
        "GapModel": "._timing",
        "Guard": "._strategies",
        "GuardCompaction": "._strategies",
        "Needle": "._needles",
        "Prompt": "._strategies",
        "ReplayResult": "._results",
        "ScriptedSummarizer": "._summarizer",
        "StickyCut": "._strategies",
        "StickyCutNewest": "._strategies",
        "Strategy": "._strategies",
        "Summarization": "._strategies",
        "SummaryCall": "._summarizer",
        "Tally": "._results",
        "TrimMessages": "._strategies",
        "ask_plan": "._needles",
        "available_strategies": "._strategies",
        "billed_input": "._metrics",
        "cached_prefix": "._metrics",
        "default_reserve": "._strategies",
        "evidence": "._metrics",
        "format_table": "._results",
        "from_history": "._metrics",
        "identifiers": "._metrics",
        "load_paths": "._transcripts",
        "make_strategies": "._strategies",
        "message_key": "._metrics",
        "message_text": "._metrics",
        "needles_in": "._needles",
        "percentile": "._metrics",
        "plot_replay": "._plot",
        "plot_tradeoff": "._plot",
        "replay": "._loop",
        "seconds": "._timing",
        "strip_notes": "._metrics",
        "tool_pairing_errors": "._metrics",
        "TRAJECTORIES_ENV_VAR": "._transcripts",
        "TranscriptError": "._transcripts",
        "load_trajectories": "._transcripts",
        "load_transcript": "._transcripts",
        "provider_prompt_tokens": "._transcripts",
        "shared_multitool_dir": "._transcripts",
        "shared_trajectory_dir": "._transcripts",
        "trajectory_to_messages": "._transcripts",
    },
)

__all__ = [
    "CACHE_RATE",
    "COUNTERS",
    "DISTANCES",
    "PROVIDER",
    "STRATEGIES",
    "TRAJECTORIES_ENV_VAR",
    "WINDOWS",
    "ContextEditing",
    "GapModel",
    "Guard",
    "GuardCompaction",
    "Needle",
    "Prompt",
    "ReplayResult",
    "ScriptedSummarizer",
    "StickyCut",
    "StickyCutNewest",
    "Strategy",
    "Summarization",
    "SummaryCall",
    "Tally",
    "TranscriptError",
    "TrimMessages",
    "ask_plan",
    "available_strategies",
    "billed_input",
    "cached_prefix",
    "default_reserve",
    "evidence",
    "format_table",
    "from_history",
    "identifiers",
    "load_paths",
    "load_trajectories",
    "load_transcript",
    "make_strategies",
    "message_key",
    "message_text",
    "needles_in",
    "percentile",
    "plot_replay",
    "plot_tradeoff",
    "provider_prompt_tokens",
    "replay",
    "seconds",
    "shared_multitool_dir",
    "shared_trajectory_dir",
    "strip_notes",
    "tool_pairing_errors",
    "trajectory_to_messages",
]
