"""The people who sign in to the workbench: names, roles and password hashes.

Hashes are argon2id (argon2-cffi: the reference implementation's bindings, the Password
Hashing Competition's winner, maintained by the Hynek Schlawack / PyCA circle); a password
is never stored, logged or taken as a command-line argument.

Workbench sessions live in ``operator_sessions`` and are read on every request with the
operator's role. Each carries a stamp of the password hash it was opened with: ``add`` for an
existing name hashes the password anew (a new salt), so a password or role set again, a removal
and a removal followed by a new ``add`` all end every session of that name, in one place and
without a race with a sign-in that verified the old password.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Connection, delete, insert, select, update

from exchange.db.schema import operator_sessions, operators
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


@dataclass(frozen=True, slots=True)
class Credentials:
    password_hash: str
    role: Role


def credentials(connection: Connection, name: str) -> Credentials | None:
    """What a sign-in verifies against (read apart from the verification, which is slow)."""
    row = connection.execute(
        select(operators.c.password_hash, operators.c.role).where(operators.c.name == name)
    ).first()
    if row is None or row.role not in ROLES:
        return None
    return Credentials(row.password_hash, row.role)


def verify(found: Credentials | None, password: str) -> bool:
    """Whether ``password`` is the operator's; as slow for an unknown name as for a known one."""
    try:
        _hasher.verify(found.password_hash if found else _dummy(), password)
    except (VerificationError, InvalidHashError):
        return False
    return found is not None


def authenticate(connection: Connection, name: str, password: str) -> Role | None:
    """The operator's role when the password is theirs, else None (same cost either way)."""
    found = credentials(connection, name)
    return found.role if found is not None and verify(found, password) else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def open_session(
    connection: Connection,
    name: str,
    verified: Credentials,
    token: str,
    now: datetime,
    lifetime: timedelta,
) -> bool:
    """Record a session for ``token`` (only its digest is kept); False when the operator's
    password changed (or they were removed) since ``verified`` was read."""
    current = connection.execute(
        select(operators.c.password_hash).where(operators.c.name == name).with_for_update()
    ).scalar()
    if current != verified.password_hash:
        return False
    connection.execute(delete(operator_sessions).where(operator_sessions.c.expires_at <= now))
    connection.execute(
        insert(operator_sessions).values(
            id=_digest(token),
            name=name,
            credential=_digest(verified.password_hash),
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    return True


def session_of(connection: Connection, token: str, now: datetime) -> tuple[str, Role] | None:
    """The operator and role of a live session, or None: signed out, expired, or its
    operator's password set again or the operator removed since it was opened."""
    row = connection.execute(
        select(
            operator_sessions.c.name,
            operator_sessions.c.credential,
            operators.c.role,
            operators.c.password_hash,
        )
        .select_from(operator_sessions)
        .join(operators, operators.c.name == operator_sessions.c.name)
        .where(operator_sessions.c.id == _digest(token), operator_sessions.c.expires_at > now)
    ).first()
    if row is None or row.role not in ROLES:
        return None
    if row.credential != _digest(row.password_hash):
        return None
    role: Role = row.role
    return row.name, role


def end_session(connection: Connection, token: str) -> None:
    connection.execute(delete(operator_sessions).where(operator_sessions.c.id == _digest(token)))
