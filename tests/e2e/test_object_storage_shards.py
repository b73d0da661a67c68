"""``data=shards`` and ``pack`` on a bucket, against a real S3 server (moto's, a separate
process on 127.0.0.1): ``pack out=s3://...`` writes the same shards as into a folder, a
pack stopped part-way leaves nothing a reader takes as complete and a rerun resumes it,
and shards read from the bucket give exactly the local shards' batches, resume mid-epoch,
ride out the server going away and treat a vanished shard as bad files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BUNDLED_PHOTOS
from helpers.batches import assert_same, batches, epoch_with, lazy
from helpers.s3server import S3Server, relayed
from helpers.shards import pack
from helpers.warm import python

from dali_pipes import build_loader, compose_config
from dali_pipes.data.s3 import forget_clients
from dali_pipes.data.shards import complete_shards
from dali_pipes.data.storage import storage_for
from dali_pipes.errors import ConfigError, DataError

BACKENDS = ["torch", "dali-cpu"]
BUCKET = "packs"
ROOT = Path(__file__).resolve().parents[2]
SMALL = "pack.shard_size_mb=0.1"  # the 13 photos in 12 shards
#: Ranged GETs of 50 KiB: every sample spans two or three blocks, and a batch's reads go
#: on past the first (eviction is checked in tests/unit/data/test_shard_reader.py).
BLOCKS = "data.block_mb=0.05"


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """This process pointed at the session's server by the standard AWS variables, with
    the bucket made."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    forget_clients()
    client = s3_server.client()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    yield s3_server
    forget_clients()


@pytest.fixture(scope="module")
def local_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped photos packed into a local folder: what every bucket is compared to."""
    out = tmp_path_factory.mktemp("local") / "packed"
    pack(Path(BUNDLED_PHOTOS), out, SMALL)
    return out


def objects(server: S3Server, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix`` by its name below it."""
    client = server.client()
    keys = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/").get("Contents", [])
    return {
        k["Key"][len(prefix) + 1 :]: client.get_object(Bucket=BUCKET, Key=k["Key"])["Body"].read()
        for k in keys
    }


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative name."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def same_pack(remote: dict[str, bytes], local: dict[str, bytes]) -> None:
    """The same files with the same bytes; dataset.json differs in its creation time only."""
    assert sorted(remote) == sorted(local)
    for name, data in local.items():
        if name == "dataset.json":
            a, b = json.loads(remote[name]), json.loads(data)
            assert a.pop("created") and b.pop("created") and a == b
        else:
            assert remote[name] == data, name


def loader(kind: str, root: str | Path, *extra: str, rank: int = 1, world_size: int = 2) -> Any:
    """A training loader over shards at ``root``: rank 1 of 2, batches of 2, a shuffle
    window, small blocks."""
    backend = kind.partition("-")[0]
    overrides = [
        "data=shards",
        f"data.root={root}",
        "data.batch_size=2",
        "data.shuffle_buffer=4",
        BLOCKS,
        "seed=5",
        f"backend={backend}",
        "backend.device=cpu",
        "augment=imagenet",
        "augment.train.crop.size=48",
        *(["backend.num_workers=1"] if backend == "torch" else []),
        *extra,
    ]
    return build_loader(compose_config(overrides), "train", rank=rank, world_size=world_size)


def test_pack_into_a_bucket_writes_the_shards_it_writes_into_a_folder(
    s3: S3Server, local_pack: Path
) -> None:
    manifest = pack(Path(BUNDLED_PHOTOS), f"s3://{BUCKET}/same", SMALL)
    assert manifest["samples"] == 13
    same_pack(objects(s3, "same"), files(local_pack))


def test_pack_reads_a_folder_in_a_bucket_into_a_bucket(s3: S3Server, local_pack: Path) -> None:
    s3.upload(Path(BUNDLED_PHOTOS), BUCKET, "photos")
    pack(f"s3://{BUCKET}/photos", f"s3://{BUCKET}/from-bucket", SMALL)
    remote, local = objects(s3, "from-bucket"), files(local_pack)
    tars = sorted(name for name in local if name.endswith((".tar", ".idx")))
    assert tars and [remote[n] for n in tars] == [local[n] for n in tars]


@pytest.mark.parametrize("block", [BLOCKS, "data.block_mb=8"])
@pytest.mark.parametrize("kind", BACKENDS)
def test_shards_in_a_bucket_give_exactly_the_local_shards_batches(
    kind: str, block: str, s3: S3Server, local_pack: Path
) -> None:
    prefix = f"read-{kind}-{block[-1]}"
    s3.upload(local_pack, BUCKET, prefix)
    with (
        loader(kind, local_pack) as local,
        loader(kind, f"s3://{BUCKET}/{prefix}", block) as remote,
    ):
        assert remote.classes == local.classes and len(remote) == len(local)
        for epoch in (0, 1):
            local.set_epoch(epoch)
            remote.set_epoch(epoch)
            assert_same(batches(remote), batches(local))


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_run_on_shards_in_a_bucket_resumes_mid_epoch_exactly(
    kind: str, s3: S3Server, local_pack: Path
) -> None:
    url = f"s3://{BUCKET}/resume-{kind}"
    s3.upload(local_pack, BUCKET, f"resume-{kind}")
    with loader(kind, local_pack) as local:
        whole = batches(local)
    with loader(kind, url) as first:
        batches(first, 1)
        state = first.state_dict()
    with loader(kind, url) as resumed:
        resumed.load_state_dict(state)
        assert_same(batches(resumed), whole[1:])


def test_a_pack_into_a_bucket_stopped_part_way_is_refused_then_resumed(
    s3: S3Server, local_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after two shards: no dataset.json, so readers refuse it; the two shards are
    complete and the third is not there at all. A shard object cut short and one whose
    bytes changed in place are found by the rerun, which writes the rest."""
    from dali_pipes.tools import pack as pack_module

    url = f"s3://{BUCKET}/stopped"
    real = pack_module.write_shard
    written: list[int] = []

    def dies_after_two(
        storage: Any, directory: str, number: int, samples: Any, notes: Any = None
    ) -> int:
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(number)
        return real(storage, directory, number, samples, notes)

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(pack_module, "write_shard", dies_after_two)
        pack(Path(BUNDLED_PHOTOS), url, SMALL)
    with pytest.raises(DataError, match="incomplete pack"):
        loader("torch", url)
    storage, shards = storage_for(url), range(len(list(local_pack.glob("all/*.tar"))))
    assert sorted(complete_shards(storage, f"{url}/all", shards)) == [0, 1]
    assert not any(name.startswith("all/shard-000002") for name in objects(s3, "stopped"))
    client, key = s3.client(), "stopped/all/shard-00000{}.tar"
    cut = client.get_object(Bucket=BUCKET, Key=key.format(0))["Body"].read()
    client.put_object(Bucket=BUCKET, Key=key.format(0), Body=cut[:-700])
    flipped = bytearray(client.get_object(Bucket=BUCKET, Key=key.format(1))["Body"].read())
    flipped[1000] ^= 0xFF  # same size, other bytes
    client.put_object(Bucket=BUCKET, Key=key.format(1), Body=bytes(flipped))
    assert sorted(complete_shards(storage, f"{url}/all", shards)) == [1]
    pack(Path(BUNDLED_PHOTOS), url, SMALL)
    same_pack(objects(s3, "stopped"), files(local_pack))
    with loader("torch", url, rank=0, world_size=1) as reader:
        assert sum(len(y) for _, y in reader) == 13


@pytest.mark.slow
def test_a_pack_into_a_bucket_killed_with_sigkill_resumes_to_the_same_shards(
    s3: S3Server, real_photos: Path, tmp_path: Path
) -> None:
    """``kill -9`` while the shards go up: what is in the bucket is whole shards only, and
    rerunning the command finishes the pack, equal to a pack into a folder."""
    command = ["-m", "dali_pipes.pack", "data=folder", f"data.root={real_photos}"]
    command.append("pack.shard_size_mb=0.3")
    env = dict(os.environ)

    def pack_cli(out: str) -> subprocess.CompletedProcess[str]:
        run = [python(), *command, f"out={out}"]
        return subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

    assert pack_cli(str(tmp_path / "clean")).returncode == 0
    url = f"s3://{BUCKET}/killed"
    proc = subprocess.Popen(  # a real interpreter: it is the process kill -9 ends
        [sys.executable, *command, f"out={url}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = s3.client()
    deadline = time.time() + 120

    def sidecars() -> int:
        found = client.list_objects_v2(Bucket=BUCKET, Prefix="killed/all/").get("Contents", [])
        return sum(1 for o in found if o["Key"].endswith(".json"))

    while sidecars() < 3 and time.time() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = objects(s3, "killed")
    assert "dataset.json" not in left, "killed before it finished"
    clean = files(tmp_path / "clean")
    for name in left:
        if name.endswith(".json") and name.startswith("all/"):  # a complete shard: whole
            tar = name.replace(".json", ".tar")
            assert left[tar] == clean[tar] and left[name] == clean[name]
    resumed = pack_cli(url)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed:" in resumed.stderr
    same_pack(objects(s3, "killed"), clean)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_shard_deleted_mid_epoch_is_bad_files_under_on_error(
    kind: str, s3: S3Server, local_pack: Path
) -> None:
    url = f"s3://{BUCKET}/deleted-{kind}"
    s3.upload(local_pack, BUCKET, f"deleted-{kind}")
    gone = f"{url}/all/shard-000003.tar"
    with loader(kind, url, "data.on_error=skip", rank=0, world_size=1) as reader:
        s3.client().delete_object(Bucket=BUCKET, Key=gone[len(f"s3://{BUCKET}/") :])
        seen = sum(len(y) for _, y in batches(reader))
        lost = [f for f in reader.bad_files if f.startswith(f"{gone}:")]
        assert seen == 13 and lost and reader.skipped == len(lost)  # substitutes took them
        assert all("gone" in reader.bad_files[f] for f in lost)
    s3.upload(local_pack, BUCKET, f"deleted-{kind}")
    with loader(kind, url, rank=0, world_size=1) as reader:  # on_error=raise: the run stops
        s3.client().delete_object(Bucket=BUCKET, Key=gone[len(f"s3://{BUCKET}/") :])
        with pytest.raises(DataError, match=f"{gone}: the object is gone"):
            batches(reader)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_run_on_shards_goes_on_when_the_server_stops_and_comes_back(
    kind: str, s3: S3Server, local_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{BUCKET}/restart-{kind}"
    s3.upload(local_pack, BUCKET, f"restart-{kind}")
    with loader(kind, local_pack, *lazy(kind), rank=0, world_size=1) as local:
        whole = batches(local)
    with (
        relayed(s3, monkeypatch) as relay,
        loader(kind, url, *lazy(kind), rank=0, world_size=1) as remote,
    ):
        down = time.monotonic()
        got = epoch_with(remote, lambda: relay.away_for(1.0))  # reads meet a closed port
        assert time.monotonic() - down >= 1.0  # they waited for the server
        assert remote.skipped == 0
    assert_same(got, whole)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_run_on_shards_goes_on_when_block_requests_stall(
    kind: str, s3: S3Server, local_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ranged GET that gets no answer, then one whose reply stops after its head: each
    times out after a quarter of ``data.read_timeout`` and is sent again; no sample is
    lost and the batches are the local shards'."""
    url = f"s3://{BUCKET}/stalls-{kind}"
    s3.upload(local_pack, BUCKET, f"stalls-{kind}")
    extra = [*lazy(kind), "data.read_timeout=8", "data.on_error=skip"]  # requests: 2 s
    with loader(kind, local_pack, *extra, rank=0, world_size=1) as local:
        whole = batches(local)
    with (
        relayed(s3, monkeypatch) as relay,
        loader(kind, url, *extra, rank=0, world_size=1) as remote,
    ):
        got = epoch_with(remote, lambda: relay.stall_next(requests=1, bodies=1))
        assert relay.stall == relay.stall_body == 0, "every stall met a read"
        assert remote.skipped == 0, remote.bad_files
    assert_same(got, whole)


def test_shards_at_a_wrong_bucket_or_prefix_are_one_line(s3: S3Server) -> None:
    with pytest.raises(DataError) as info:
        loader("torch", "s3://no-such-bucket/packed")
    assert "s3://no-such-bucket/packed" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DataError, match=f"s3://{BUCKET}/absent holds no pack"):
        loader("torch", f"s3://{BUCKET}/absent")


def test_pack_into_a_prefix_holding_other_objects_is_refused(s3: S3Server) -> None:
    s3.client().put_object(Bucket=BUCKET, Key="busy/notes.txt", Body=b"mine")
    with pytest.raises(ConfigError, match=f"out=s3://{BUCKET}/busy is not empty"):
        pack(Path(BUNDLED_PHOTOS), f"s3://{BUCKET}/busy", SMALL)


def test_a_wrong_key_is_one_line_for_shards_and_for_pack(
    s3: S3Server, local_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that checks credentials (moto with its IAM on): an unknown key is refused,
    reading shards and packing into the bucket alike."""
    server = S3Server(auth=True).start()
    try:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        forget_clients()
        for attempt in (
            lambda: loader("torch", f"s3://{BUCKET}/packed"),
            lambda: pack(Path(BUNDLED_PHOTOS), f"s3://{BUCKET}/packed", SMALL),
        ):
            with pytest.raises((DataError, ConfigError)) as info:
                attempt()
            line = str(info.value)
            assert f"s3://{BUCKET}/packed" in line and "AWS_ACCESS_KEY_ID" in line
            assert "\n" not in line
    finally:
        server.stop()
        forget_clients()


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_server_gone_for_good_stops_the_run_in_one_line_even_under_skip(
    kind: str, s3: S3Server, local_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a bad file: when the store itself stays unreachable past the retries, skipping
    would only mark every sample bad; the run stops with the store's line."""
    s3.upload(local_pack, BUCKET, f"down-{kind}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    url = f"s3://{BUCKET}/down-{kind}"
    with (
        relayed(s3, monkeypatch) as relay,
        loader(kind, url, "data.on_error=skip", rank=0, world_size=1) as reader,
    ):
        relay.stop()
        with pytest.raises(DataError) as info:
            batches(reader)
    line = str(info.value)
    assert f"{url}/all/shard-" in line and "no answer" in line and "\n" not in line


def test_a_pack_at_the_top_of_a_bucket_is_written_and_read(s3: S3Server, local_pack: Path) -> None:
    s3.client().create_bucket(Bucket="top-level-pack")
    pack(Path(BUNDLED_PHOTOS), "s3://top-level-pack", SMALL)
    client = s3.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="top-level-pack")["Contents"]]
    assert "dataset.json" in keys and "all/shard-000000.tar" in keys
    with loader("torch", local_pack) as local, loader("torch", "s3://top-level-pack/") as remote:
        assert_same(batches(remote), batches(local))


def test_an_s3_url_without_a_bucket_is_one_line() -> None:
    with pytest.raises(DataError, match="s3:// is not an S3 URL"):
        pack(Path(BUNDLED_PHOTOS), "s3://", SMALL)
