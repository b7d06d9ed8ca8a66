"""One module per agent: its command line, configuration and the mapping of its own trajectory."""
