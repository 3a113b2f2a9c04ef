"""Transactions and what they do to the state: actions, the state view, its commitment, RAM,
contract calls and the transaction transition."""
