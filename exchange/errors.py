"""The project's exception tree. Each docstring is the default message.

    ExchangeError
    ├── ConfigurationError      bad settings: exit 2 before any work starts
    ├── DatabaseUnavailable     the database cannot be reached or is not migrated
    ├── BrokerUnavailable       a broker source (RabbitMQ, Redis) cannot be reached now
    ├── OperatorError           an operator command that cannot be carried out as asked
    └── ReadBackFailed          the shop's prices cannot be read back (exchange verify)

Library exceptions (SQLAlchemy, httpx, pydantic) are converted to these at the boundary;
the CLI prints ``str(error)`` on one line and exits 2.
"""

from __future__ import annotations


class ExchangeError(Exception):
    """exchange failed"""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(ExchangeError):
    """the configuration is invalid"""


class DatabaseUnavailable(ExchangeError):
    """the database cannot be reached"""


class BrokerUnavailable(ExchangeError):
    """the broker cannot be reached"""

    def __init__(self, message: str, *, said: bool = False) -> None:
        super().__init__(message)
        # The source has already said it in its one line (the connection lost), or it waits
        # out the backoff of a failure it said: the worker need not say it again at WARNING.
        self.said = said


class OperatorError(ExchangeError):
    """the command cannot be carried out as asked"""


class Conflict(OperatorError):
    """the command is well formed, yet the state of what it names refuses it (a newer price,
    a price live already): the workbench answers 409, never 400"""


class ReadBackFailed(ExchangeError):
    """the shop's prices cannot be read back"""
