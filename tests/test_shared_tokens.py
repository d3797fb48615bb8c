"""API tokens shared by replicas through a PostgreSQL store (a real server): one mint per principal, files (a
Secret) win, and every replica accepts every replica's tokens; the store keeps hashes only."""

from __future__ import annotations

from pathlib import Path

from burst.api.tokens import Principal, digest, load_api_tokens
from burst.state import Store


def test_two_replicas_mint_each_token_once_and_accept_each_others(pg_url: str, tmp_path: Path) -> None:
    with Store.open(pg_url) as store_a, Store.open(pg_url) as store_b:
        a = load_api_tokens(tmp_path / "a", ["prod"], shared=store_a)
        b = load_api_tokens(tmp_path / "b", ["prod", "batch"], shared=store_b)
        assert a.admin and a.tenants["prod"], "the first replica mints and keeps its files"
        assert b.admin == "" and "prod" not in b.tenants, "the second mints nothing the first has minted"
        assert not (tmp_path / "b" / "admin.token").exists()
        assert b.tenants["batch"], "a principal nobody has minted yet is minted where it is first needed"
        assert b.resolve(a.admin) == Principal(None)
        assert b.resolve(a.tenants["prod"]) == Principal("prod")
        assert a.resolve(b.tenants["batch"]) == Principal("batch"), "read from the store when not held"
        assert a.resolve("not-a-token") is None and b.resolve("") is None
        hashes = store_a.token_hashes()
        assert hashes == {"admin": digest(a.admin), "tenant-prod": digest(a.tenants["prod"]),
                          "tenant-batch": digest(b.tenants["batch"])}
        assert a.admin not in str(store_a.token_hashes()), "only hashes are stored"


def test_a_mounted_token_file_is_the_truth_on_every_replica(pg_url: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "admin.token").write_text("from-the-secret\n")
    with Store.open(pg_url) as store:
        first = load_api_tokens(tmp_path / "minted", [], shared=store)  # a replica that started before the Secret
        assert first.admin and first.admin != "from-the-secret"
        mounted = load_api_tokens(secret, [], shared=store)
        assert mounted.admin == "from-the-secret"
        assert first.resolve("from-the-secret") == Principal(None), "the rotated token reaches the other replica"
        assert mounted.resolve(first.admin) is None, "the replaced token no longer opens anything shared"
