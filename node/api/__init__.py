"""The node's public API, apart from the wiring: the aiohttp shell (``http``), the RPC
logic (``rpc``) with its route table, request fields, JSON views and OpenAPI document, reads
paced against writes (``reads``) and the blocks' JSON cache (``blockcache``).
The websocket stream of chain events: ``stream``, ``stream_doc``, ``stream_frames``,
``stream_session``.

It is handed the chain runner, admission and metrics; it never imports the wiring
(``node.app``, ``node.cli``) or the parts beside it (producer, finalizer): an import-linter
contract in ``pyproject.toml``.
"""
