"""The ``tavernbox`` command line: one module per command."""
