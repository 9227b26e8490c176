#!/usr/bin/env bash
# What can be checked of the container without a Docker engine: the wheel builds, carries the
# migrations, installs into a fresh virtual environment (with the `postgres` extra, as in the
# Dockerfile), and the installed `exchange` runs `--help`, `migrate` and `demo` from a directory
# outside the checkout, so the wheel's packaged migrations are used, not ./migrations.
#
#   scripts/check-wheel.sh                      # builds with .venv/bin/python, else python3
#   PYTHON=/path/to/python scripts/check-wheel.sh
#   KEEP=1 scripts/check-wheel.sh               # keep the temporary directory for a look
#
# Exits non-zero, with the failing step named, at the first thing that does not hold.
set -Eeuo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$repo/.venv/bin/python" ]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi
EXTRAS="${EXTRAS-postgres}"

work="$(mktemp -d "${TMPDIR:-/tmp}/exchange-wheel.XXXXXX")"
step="start"

fail() {
    echo >&2
    echo "check-wheel: FAILED at step '$step'${1:+: $1}" >&2
    echo "check-wheel: files kept in $work" >&2
    exit 1
}
trap 'fail "command \"$BASH_COMMAND\" exited $? (line $LINENO)"' ERR
trap '[ "$?" -eq 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$work"' EXIT

say() { step="$1"; echo "check-wheel: $1"; }

# The fresh environment must see nothing of the checkout or of the caller's configuration.
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV EXCHANGE_CONFIG
for name in $(compgen -e | grep '^EXCHANGE_' || true); do unset "$name"; done

say "build the wheel"
command -v "$PYTHON" > /dev/null || fail "no Python at '$PYTHON' (set PYTHON=...)"
echo "  with $PYTHON"
"$PYTHON" -m pip wheel --quiet --no-deps --no-cache-dir --wheel-dir "$work/dist" "$repo"
shopt -s nullglob
wheels=("$work"/dist/exchange-*.whl)
shopt -u nullglob
[ "${#wheels[@]}" -eq 1 ] || fail "expected one exchange wheel in $work/dist, found ${#wheels[@]}"
wheel="${wheels[0]}"
echo "  $(basename "$wheel")"

say "the wheel carries the migrations and the compiled catalogs"
"$PYTHON" - "$wheel" <<'PY' || fail "the wheel lacks the migrations (see above)"
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
versions = [n for n in names if n.startswith("exchange/_migrations/versions/") and n.endswith(".py")]
missing = [n for n in ("exchange/_migrations/env.py", "exchange/_migrations/script.py.mako",
                       "exchange/cli/__init__.py",
                       "exchange/locale/ru/LC_MESSAGES/exchange.mo") if n not in names]
strays = sorted(n for n in names if n.startswith(("migrations/", "tests/")))
for problem, items in (("missing", missing), ("outside the package", strays)):
    if items:
        print(f"  {problem}: {', '.join(items)}", file=sys.stderr)
if not versions:
    print("  missing: exchange/_migrations/versions/*.py", file=sys.stderr)
if missing or strays or not versions:
    sys.exit(1)
print(f"  env.py, script.py.mako, {len(versions)} revision(s) and the Russian catalog")
PY

say "install into a fresh virtual environment"
python3 -m venv "$work/venv"
spec="$wheel"
if [ -n "$EXTRAS" ]; then spec="${wheel}[${EXTRAS}]"; fi
"$work/venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "$spec"
exchange="$work/venv/bin/exchange"
[ -x "$exchange" ] || fail "the wheel installed no exchange command"

# Everything below runs from an empty directory outside the checkout.
mkdir "$work/run"
cd "$work/run"

say "the installed package is the wheel's, with its own migrations"
"$work/venv/bin/python" - "$work/venv" "$repo" <<'PY' || fail "the package or its migrations resolve to the wrong place"
import sys
from pathlib import Path

import exchange
from exchange.db.migrate import script_location

venv, repo = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
package = Path(exchange.__file__).resolve()
location = script_location().resolve()
print(f"  exchange:   {package}")
print(f"  migrations: {location}")
ok = True
for what, path in (("exchange", package), ("migrations", location)):
    if not path.is_relative_to(venv) or path.is_relative_to(repo):
        print(f"  {what} is not from the fresh environment", file=sys.stderr)
        ok = False
if location.name != "_migrations" or not (location / "env.py").is_file():
    print("  the packaged exchange/_migrations is not what migrate uses", file=sys.stderr)
    ok = False
sys.exit(0 if ok else 1)
PY
if [[ ",$EXTRAS," == *",postgres,"* ]]; then
    "$work/venv/bin/python" -c "import psycopg; print('  psycopg', psycopg.__version__)" \
        || fail "the postgres extra did not install psycopg"
fi

say "exchange --help"
"$exchange" --help > "$work/help.txt"
for command in run migrate status history quarantine demo; do
    grep -q "$command" "$work/help.txt" || fail "exchange --help does not list '$command'"
done

say "exchange migrate (a fresh SQLite file)"
export EXCHANGE_DATABASE_URL="sqlite:///$work/run/exchange.db"
"$exchange" migrate | tee "$work/migrate.txt"
grep -q "to revision [0-9a-z]" "$work/migrate.txt" || fail "migrate did not report a revision"
"$exchange" migrate > /dev/null  # a second time: nothing to do, still exit 0
"$exchange" status --json > "$work/status.json"
"$work/venv/bin/python" -c "import json, sys; json.load(open(sys.argv[1]))['counts']" \
    "$work/status.json" || fail "status --json on the migrated database is not the expected JSON"
unset EXCHANGE_DATABASE_URL

say "exchange demo --skus 50"
"$exchange" demo --skus 50 --dir "$work/run/demo" > "$work/demo.txt" 2>&1 \
    || { tail -n 40 "$work/demo.txt" >&2; fail "exchange demo exited non-zero"; }
for file in demo.db quarantine.html quarantine.json; do
    [ -s "$work/run/demo/$file" ] || fail "exchange demo wrote no $file"
done
tail -n 5 "$work/demo.txt"

step="done"
echo "check-wheel: OK ($(basename "$wheel") installs and runs from a fresh virtual environment)"
