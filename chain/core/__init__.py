"""The rules of the chain, pure: domain types and errors, canonical encoding, keys and
signatures, actions, transactions and blocks, the state and its commitment, the transaction
and block transitions, DPoS, finality by votes and the vote pool.

Functions of state and input (and small in-memory values): no clock, disk, network, threads
or processes, and no import of the rest of ``chain``, so that everything above can trust it
and every rule can be tested alone.
"""
