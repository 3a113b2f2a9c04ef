"""``bor-contract``: builds AssemblyScript contracts with the pinned compiler and the SDK in
``contracts/sdk``, and checks the result the way a node checks a ``setcode``, so a module
that builds is one the chain accepts."""
