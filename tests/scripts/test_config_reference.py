"""docs/config.md is what scripts/config_reference.py makes from the options table now."""

from __future__ import annotations

from node.config.model import OPTIONS
from scripts.config_reference import MACHINE_DEFAULTS, REFERENCE, render


def test_the_config_reference_is_generated_from_the_options_table() -> None:
    """An option added, removed or changed in node/config/model.py without regenerating
    docs/config.md fails here; run scripts/config_reference.py to update it."""
    assert REFERENCE.read_text() == render(), "run: .venv/bin/python scripts/config_reference.py"


def test_every_option_has_a_row() -> None:
    """Each option of the table, top level and every section, appears in the reference."""
    text = render()
    missing = [o.name for o in OPTIONS if f"| `{o.name}` |" not in text]
    assert missing == []


def test_machine_dependent_defaults_name_real_options() -> None:
    """The defaults the reference words by hand belong to options that exist."""
    assert set(MACHINE_DEFAULTS) <= {o.name for o in OPTIONS}
