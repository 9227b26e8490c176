"""argon2id at its smallest cost for the tests that sign in (tests/conftest.py puts it in
place of the production hasher for the whole run).

Production hashes with argon2-cffi's defaults (RFC 9106's low-memory choice: 3 passes over
64 MiB in 4 lanes): about 0.25 s of CPU for each hash and for each verification, on purpose.
The workbench, security and CLI tests add operators and sign in hundreds of times, and every
one of those paid it: the suite's largest CPU cost after starting processes. What those tests
check (who may sign in, sessions, the throttle, the argon2 threads) does not depend on the
cost; the cost itself is checked against ``PRODUCTION`` by
tests/security/test_password_hashing.py. A process the tests start (``exchange serve`` as a
command) hashes at the production cost, and a hash verifies at the parameters written in it.
"""

from __future__ import annotations

from argon2 import PasswordHasher, Type

from exchange.ops import operators

PRODUCTION: PasswordHasher = operators._hasher
# argon2's minimum: one pass over 8 KiB in one lane, still argon2id ("$argon2id$...").
QUICK = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)
