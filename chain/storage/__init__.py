"""Where the chain is kept: the LevelDB block store (its keys are ``chain.core.primitives.schema``),
the commit mark beside it, the state cache in front of it, and the portable files: the block
log and snapshots. Built on ``chain.core`` alone.
"""
