"""The contract runtime: WebAssembly contracts run by wasmtime, metered and deterministic.

``ContractRuntime`` implements the core's ``ContractHost``: it validates modules offered by
``setcode``, compiles and caches them, and runs a contract action (and the inline actions it
sends) against a ``StateView`` with a fuel budget, a memory cap and host functions named
after Antelope's. Nothing here decides what a block or transaction is; that stays in
``chain.core``.
"""

from chain.vm.runtime import ContractRuntime

__all__ = ["ContractRuntime"]
