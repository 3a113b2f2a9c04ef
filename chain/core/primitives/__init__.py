"""What every rule is written in: names, amounts and keys, the canonical encoding, hashes
and signatures, the state's key schema and the chain's parameters."""
