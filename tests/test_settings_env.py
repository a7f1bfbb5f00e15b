from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import database_from_url, env_bool, env_int, env_list


def test_a_postgres_url_becomes_a_postgresql_database() -> None:
    database = database_from_url("postgres://quire:s%40cret@db.internal:5433/quire_prod?sslmode=require")
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["NAME"], database["USER"], database["PASSWORD"]) == ("quire_prod", "quire", "s@cret")
    assert (database["HOST"], database["PORT"]) == ("db.internal", "5433")
    assert database["OPTIONS"] == {"sslmode": "require"}


def test_sqlite_urls_follow_sqlalchemy_relative_and_absolute_forms() -> None:
    assert database_from_url("sqlite:///var/db.sqlite3")["NAME"] == "var/db.sqlite3"
    assert database_from_url("sqlite:////srv/quire/db.sqlite3")["NAME"] == "/srv/quire/db.sqlite3"


def test_sqlite_databases_run_in_wal_mode_with_immediate_transactions() -> None:
    options = database_from_url("sqlite:///x.sqlite3")["OPTIONS"]
    assert "journal_mode=WAL" in options["init_command"]
    assert options["transaction_mode"] == "IMMEDIATE"


@pytest.mark.parametrize("url", ["mysql://x@y/z", "postgres://user@host/", "sqlite:///", "nonsense"])
def test_an_unusable_database_url_is_refused_with_its_name(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url(url)


def test_booleans_accept_the_usual_spellings_and_refuse_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAG", "Yes")
    assert env_bool("FLAG") is True
    monkeypatch.setenv("FLAG", "off")
    assert env_bool("FLAG", default=True) is False
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG"):
        env_bool("FLAG")


def test_integers_are_checked_for_form_and_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMIT", "12")
    assert env_int("LIMIT", 1, minimum=1) == 12
    monkeypatch.setenv("LIMIT", "twelve")
    with pytest.raises(ImproperlyConfigured, match="whole number"):
        env_int("LIMIT", 1)
    monkeypatch.setenv("LIMIT", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        env_int("LIMIT", 1, minimum=1)


def test_lists_are_comma_separated_and_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTS", " a.example , b.example,, ")
    assert env_list("HOSTS") == ["a.example", "b.example"]
    monkeypatch.delenv("HOSTS")
    assert env_list("HOSTS", ["default"]) == ["default"]
