"""State sync: fetching a trusted snapshot from several peers in verified chunks, and
serving ours."""
