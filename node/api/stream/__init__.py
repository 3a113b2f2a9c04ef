"""``/v1/chain/stream``: the hub that fans the chain's events out, one session per
subscriber, replay from the store, the frames, the contract data decoded in them, and their
AsyncAPI document."""
