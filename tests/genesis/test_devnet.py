"""The dev genesis generator behind ``bor-node genesis new`` and ``bor-node devnet``."""

from __future__ import annotations

import json
from pathlib import Path

from genesis.devnet import make_dev_genesis, write_dev_genesis
from genesis.model import load_genesis


def test_new_chains_finalize_by_votes_and_say_so_in_their_file(tmp_path: Path) -> None:
    """A generated genesis is finality = votes, written out in the file (a file without the
    field is read as dpos, for chains made before); params can still ask for dpos."""
    genesis, _ = make_dev_genesis(3)
    assert genesis.params.finality == "votes"
    assert make_dev_genesis(3, params={"finality": "dpos"})[0].params.finality == "dpos"
    path, _ = write_dev_genesis(tmp_path, 3)
    assert json.loads(path.read_text())["chain_params"]["finality"] == "votes"
    assert load_genesis(path).params.finality == "votes"
