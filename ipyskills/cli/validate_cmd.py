"""Placeholder until this command group is written."""


def register(subparsers) -> None:
    pass
