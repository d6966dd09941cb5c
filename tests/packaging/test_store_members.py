"""Every store member a caller uses is declared on `SessionStore`, and none is read with `getattr`.

A store is whatever `Session.create`/`open` are given (`store=`) or `open_store` builds; its
members are the six methods every store defines and the optional ones `SessionStore` declares
with defaults (`dshkit.session.stores.protocol`). A `getattr(store, "x", default)` is a member the
contract does not say exists: this test refuses it, and any read of an undeclared member.
"""

from __future__ import annotations

import ast

import pytest

import dshkit
from dshkit.session import JsonlStore, Session, SqliteStore
from dshkit.session.stores.protocol import OPTIONAL_MEMBERS, REQUIRED_MEMBERS, SessionStore, check_store

from tests.packaging.test_layout import MODULES

STORE_NAMES = {"store", "_store"}  # what the package calls a store it holds
STORE_DEFINING = ("dshkit.session.stores.", "dshkit.session.dsh.jsonl_store", "dshkit.session.dsh.sqlite_store")


def _names_a_store(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in STORE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in STORE_NAMES


def test_no_store_member_is_read_with_getattr() -> None:
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                if node.args and _names_a_store(node.args[0]):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found


def test_every_store_member_read_is_declared() -> None:
    declared = set(REQUIRED_MEMBERS) | set(OPTIONAL_MEMBERS)
    undeclared = []
    for name, path in MODULES.items():
        if name.startswith(STORE_DEFINING):
            continue  # a store's own module reads its own attributes
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and _names_a_store(node.value) and node.attr not in declared:
                undeclared.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not undeclared, undeclared


def test_the_protocol_lists_every_member_it_declares() -> None:
    annotated = set(SessionStore.__annotations__)
    methods = {
        name for name, value in vars(SessionStore).items() if (callable(value) or isinstance(value, property)) and not name.startswith("_")
    }
    assert annotated | methods == set(REQUIRED_MEMBERS) | set(OPTIONAL_MEMBERS)


def test_shipped_stores_inherit_the_optional_defaults(tmp_path) -> None:
    jsonl = JsonlStore(tmp_path / "a.jsonl")
    assert (jsonl.read_only, jsonl.waits_on_network, jsonl.session_id, jsonl.url) == (False, False, None, None)
    assert jsonl.log_format.name == "dshkit" and jsonl.path == tmp_path / "a.jsonl"
    assert SqliteStore(tmp_path / "a.sqlite").attachment_backend() is not None


class SixMethodsOnly:
    """A store as the protocol used to be written down: the six methods, nothing else."""

    def create(self, header, durability): ...
    def load(self, durability, *, read_only): ...
    def describe(self, index): return "here"
    def append(self, event, record): ...
    def sync(self): ...
    def close(self): ...


def test_a_store_lacking_a_member_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"SixMethodsOnly lacks the SessionStore member\(s\) log_format, read_only, waits_on_network, syncs_beside_appends, pending_sync, session_id, path, url, attachment_backend: subclass"):
        Session.create(store=SixMethodsOnly())
    with pytest.raises(TypeError, match="lacks the SessionStore member"):
        Session.open(store=SixMethodsOnly())


def test_a_subclass_gets_the_defaults_and_must_define_the_six_methods() -> None:
    class Complete(SixMethodsOnly, SessionStore):
        pass

    assert check_store(Complete()).read_only is False

    class Incomplete(SessionStore):
        def describe(self, index: int) -> str:
            return "here"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]


class ListStore(SessionStore):
    """A user's own store: a list in memory, the six methods and nothing else."""

    def __init__(self, records: list[str]) -> None:
        self.records = records

    def create(self, header: str, durability: str) -> None:
        if self.records:
            raise FileExistsError("a log exists")
        self.records.append(header)

    def load(self, durability: str, *, read_only: bool) -> tuple[str, list[str]]:
        return self.records[0], self.records[1:]

    def describe(self, index: int) -> str:
        return f"record {index + 1}"

    def append(self, event: object, record: str) -> None:
        self.records.append(record)

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_users_store_needs_only_the_six_methods_when_it_subclasses() -> None:
    records: list[str] = []
    with Session.create(store=ListStore(records)) as session:
        block = session.attach(b"bytes", "text/plain")  # no backend of its own: kept in memory
        session.append("user/message", dshkit.create_user_message("hi", source={"kind": "user"}))
        assert session.format == "dshkit" and not session.waits_on_network
        assert session.attachments.read(block["attachment"]["id"]) == b"bytes"
    with Session.open(store=ListStore(records)) as reopened:
        assert [m.text for m in reopened.messages()] == ["hi"]
