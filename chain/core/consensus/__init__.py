"""Blocks and agreement on them: headers, the DPoS schedule, quorum certificates, votes and
finality."""
