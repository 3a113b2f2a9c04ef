"""Block sync: the manager that plans ranges, the reactor that fetches and serves them, the
applier that orders them, and header sync."""
