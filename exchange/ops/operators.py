"""The people who sign in to the workbench: names, roles and password hashes.

Hashes are argon2id (argon2-cffi: the reference implementation's bindings, the Password
Hashing Competition's winner, maintained by the Hynek Schlawack / PyCA circle); a password
is never stored, logged or taken as a command-line argument.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Connection, delete, insert, select, update

from exchange.db.schema import operators
from exchange.errors import OperatorError

Role = Literal["viewer", "operator"]
ROLES: tuple[Role, ...] = ("viewer", "operator")
MIN_PASSWORD = 8
_hasher = PasswordHasher()


@functools.cache
def _dummy() -> str:
    """Verified against when the name is unknown, so that a wrong name costs as long as a wrong
    password (the time does not tell which names exist). Made on first need, not at import (a
    hash costs 200-390 ms and most commands never sign anyone in); the workbench makes it when
    it starts (``prepare``), so the first unknown name costs no more than the next."""
    return _hasher.hash("not a password of anyone")


def prepare() -> None:
    """Make the hash an unknown name is checked against, before the first sign-in."""
    _dummy()


def check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 100 or any(ch.isspace() or not ch.isprintable() for ch in name):
        raise OperatorError("an operator's name is 1-100 printable characters without spaces")
    return name


def add(connection: Connection, name: str, role: str, password: str, now: datetime) -> None:
    name = check_name(name)
    if role not in ROLES:
        raise OperatorError(f"unknown role {role!r}: viewer or operator")
    if len(password) < MIN_PASSWORD:
        raise OperatorError(f"the password is too short: at least {MIN_PASSWORD} characters")
    hashed = _hasher.hash(password)
    exists = connection.execute(select(operators.c.name).where(operators.c.name == name)).first()
    if exists:
        connection.execute(
            update(operators)
            .where(operators.c.name == name)
            .values(role=role, password_hash=hashed)
        )
    else:
        connection.execute(
            insert(operators).values(name=name, role=role, password_hash=hashed, created_at=now)
        )


def remove(connection: Connection, name: str) -> None:
    if connection.execute(delete(operators).where(operators.c.name == name)).rowcount == 0:
        raise OperatorError(f"no operator named {name!r}")


def listed(connection: Connection) -> list[dict[str, Any]]:
    rows = connection.execute(
        select(operators.c.name, operators.c.role, operators.c.created_at).order_by(
            operators.c.name
        )
    ).mappings()
    return [
        {"name": r["name"], "role": r["role"], "created_at": r["created_at"].isoformat()}
        for r in rows
    ]


def role_of(connection: Connection, name: str) -> Role | None:
    role = connection.execute(select(operators.c.role).where(operators.c.name == name)).scalar()
    return role if role in ROLES else None


def authenticate(connection: Connection, name: str, password: str) -> Role | None:
    """The operator's role when the password is theirs, else None (same cost either way)."""
    row = connection.execute(select(operators).where(operators.c.name == name)).mappings().first()
    try:
        _hasher.verify(row["password_hash"] if row else _dummy(), password)
    except (VerificationError, InvalidHashError):
        return None
    if row is None or row["role"] not in ROLES:
        return None
    role: Role = row["role"]
    return role
