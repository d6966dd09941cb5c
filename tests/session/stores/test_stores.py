"""Which store a location selects (`dshkit.session.stores.open_store`).

What every store must do is the contract suite, `test_store_contract.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dshkit.session import JsonlStore, Session, SqliteStore, open_store


def test_the_suffix_selects_the_store(tmp_path: Path):
    assert isinstance(open_store(tmp_path / "a.jsonl"), JsonlStore)
    assert isinstance(open_store(tmp_path / "a.sqlite"), SqliteStore)
    assert isinstance(open_store(tmp_path / "a.DB"), SqliteStore)
    with pytest.raises(ValueError, match="store="):
        Session.create(tmp_path / "a.txt")
    with pytest.raises(ValueError, match="not both"):
        Session.create(tmp_path / "a.jsonl", store=JsonlStore(tmp_path / "b.jsonl"))
    with pytest.raises(ValueError, match="path or a store"):
        Session.open()


def test_a_store_object_bypasses_the_selection(tmp_path: Path, build):
    store = JsonlStore(tmp_path / "log.data")
    with Session.create(store=store) as session:
        session.append("user/message", build.user())
    with Session.open(store=JsonlStore(tmp_path / "log.data")) as session:
        assert len(session.messages()) == 1


def test_a_location_may_be_a_string(tmp_path: Path):
    assert isinstance(open_store(str(tmp_path / "a.jsonl")), JsonlStore)
    assert isinstance(open_store(str(tmp_path / "a.sqlite")), SqliteStore)
    with pytest.raises(ValueError, match=r"cannot tell the store from 'notes\.txt'"):
        open_store("notes.txt")


def test_a_url_of_an_unknown_scheme_selects_nothing(tmp_path: Path):
    with pytest.raises(ValueError, match="cannot tell the store from 'mysql://db.example/logs'"):
        open_store("mysql://db.example/logs")
    assert not (tmp_path / "postgresql:").exists()


def test_choose_store_tells_the_store_without_opening_anything(tmp_path: Path):
    from dshkit.session.stores import choose_store, open_store

    url = "postgresql://user@127.0.0.1:1/none"
    chosen = choose_store(url)
    assert chosen is not None and chosen.name == "postgres" and chosen.holds_many and chosen.is_url
    assert choose_store(tmp_path / "a.jsonl").name == "jsonl"  # type: ignore[union-attr]
    assert choose_store(tmp_path / "a.DB").name == "sqlite"  # type: ignore[union-attr]
    assert choose_store(tmp_path / "notes.txt") is None
    assert choose_store(tmp_path / "new.jsonl.zstd", format="dsh").name == "dsh_jsonl"  # type: ignore[union-attr]
    assert list(tmp_path.iterdir()) == []  # nothing was created
    with pytest.raises(ValueError, match="the URL schemes are postgresql://, postgres://"):
        choose_store("mysql://db.example/logs")
    with pytest.raises(ValueError, match="format must be 'dshkit' or 'dsh', not 'json'"):
        choose_store(tmp_path / "a.jsonl", format="json")
    try:
        import psycopg  # noqa: F401
    except ImportError:  # without the extra, the store says which one to install
        with pytest.raises(ImportError, match=r"dshkit\[postgres\]"):
            open_store(url, session_id="s-1")
        return
    store = open_store(url, session_id="s-1")  # a database: the session id picks the session
    assert type(store).__name__ == "PostgresStore" and store.session_id == "s-1"  # type: ignore[attr-defined]
