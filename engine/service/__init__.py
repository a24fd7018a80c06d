"""``tavernbox serve``: the engines, the asset library and an OpenAI-compatible endpoint over HTTP.

One module per job: :mod:`.app` (the application and its guard), :mod:`.auth` (token and origin),
:mod:`.limits` (the body limit), :mod:`.answers` (error envelope, JSON bodies), :mod:`.engines`
(macros, render, activate, replay, import), :mod:`.lint` (static checks), :mod:`.library`
(stored assets), :mod:`.requests`
(assemble and chat completions), :mod:`.sessions` (rule-file strategies and their snapshot
records), :mod:`.upstream` (forwarding to an OpenAI-compatible server).
"""

from __future__ import annotations

from .app import ServiceConfig, create_app

__all__ = ["ServiceConfig", "create_app"]
