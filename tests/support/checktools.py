"""Constants of the check tests, in a module of its own: ``from conftest import ...`` would
find whichever conftest module was imported first in a mixed session."""

TOKEN = "chk-token-5e2b91"
