"""Errors of the runtime itself, apart from the chain's verdicts on transactions.

A contract's failure is a ``ChainError`` (``ContractError``, ``ResourceExceeded``): the same
on every node, so a block holding it is invalid everywhere. ``RuntimeFault`` is this node's
own trouble (an instance slot or a memory it could not get): it says nothing about the block
or transaction being run, so it is deliberately not a ``ChainError`` and no caller may turn
it into one.
"""

from __future__ import annotations


class RuntimeFault(RuntimeError):
    """This node could not run a contract action (wasmtime failed for a reason of its own,
    not a trap): the block or transaction is neither valid nor invalid for that."""
