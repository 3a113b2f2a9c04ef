"""The node's public API, apart from the wiring: the aiohttp shell (``http``), the RPC
logic (``rpc``) with its route table, request fields, JSON views and OpenAPI document, reads
paced against writes (``reads``), the blocks' JSON cache (``blockcache``) and the one
shape of every payload (``payloads``: amounts as assets, contract data decoded), the
fields Antelope's clients read (``antelope``), batches (``batch``: push_transactions). The
contract routes and their reads (``contracts``).
The listener's sockets and limits (``listener``). The websocket stream of chain events:
``stream`` (``hub``, ``session``, ``replay``, ``frames``, ``abis``, ``asyncapi``).

It is handed the chain runner, admission and metrics; it never imports the wiring
(``node.app``, ``node.cli``) or the parts beside it (producer, voting): an import-linter
contract in ``pyproject.toml``.
"""
