"""BPS: topic publish/subscribe for tenants over NATS JetStream, with the access control,
topics and anchors of what was published kept on the BoR chain (the ``bps`` contract)."""
