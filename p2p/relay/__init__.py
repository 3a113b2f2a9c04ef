"""Relay of new transactions, votes and blocks to every peer that lacks them."""
