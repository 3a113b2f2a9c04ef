"""The contract routes: get_abi, get_code, get_table_rows, the token reads and read-only
``call`` (``api``), over the rows, ABIs and code read from a frozen state (``reads``)."""
