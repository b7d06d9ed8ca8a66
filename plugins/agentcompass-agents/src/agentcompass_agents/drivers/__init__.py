"""Drivers shipped into bundles: small programs that run an agent that is a library (their ``main`` is the
bundle's command)."""
