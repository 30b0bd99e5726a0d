"""The agent layer: skills as tools for a model, between the core (skills as data, the agent text) and the
notebook and CLI. Importing this package loads nothing; import the module you need (see docs/internals.md).
"""
