"""``python -m dali_pipes.pack data=folder data.root=DIR out=SHARDS``: a dataset -> tar shards.

``DIR`` and ``SHARDS`` are local folders or bucket prefixes (``s3://bucket/prefix``); any
source packs (``data=parquet`` too), read through the source interface
(:mod:`dali_pipes.data.interface`).

Reading millions of small files costs a file open and a seek each; a packed dataset is a
few hundred large files read nearly sequentially (:mod:`dali_pipes.data.shards` has the layout).
Samples are shuffled across shards (seeded), each keeps its class index, and shards are
cut at ``pack.shard_size_mb``.

Interrupted packs: every shard is written whole or not at all (a temporary file renamed
into place, or one PUT of an object), then its index, then its sidecar, which marks it
complete; ``dataset.json`` is written last, so a reader
refuses a pack that did not finish. Rerunning the same command resumes: the plan (which
sample goes to which shard) is a function of the input files and the settings, recorded
as a fingerprint in ``.pack-plan.json``; complete shards are kept, the rest rewritten. If
the inputs or settings changed, the pack is refused unless ``pack.overwrite=true``, which
redoes it from scratch.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from dali_pipes.config import cli
from dali_pipes.config.schemas import PackSpec
from dali_pipes.config.specs import to_spec
from dali_pipes.data.interface import SampleStat, Source, Stats, images_of
from dali_pipes.data.policy import OnError
from dali_pipes.data.registry import open_source
from dali_pipes.data.s3 import split_url
from dali_pipes.data.shards import (
    FORMAT,
    MANIFEST,
    PLAN,
    ShardSample,
    complete_shards,
    image_ext,
    sample_key,
    shard_name,
    write_json,
    write_shard,
)
from dali_pipes.data.specs import DataSpec, MixData, ShardData
from dali_pipes.data.storage import Storage, is_url, join, storage_for
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.baseline import JPEGTRAN_HINT, jpegtran
from dali_pipes.image.decode import header_size
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT
from dali_pipes.tools.pack_store import Storing, Tally

log = logging.getLogger("dali_pipes.pack")


@dataclass(frozen=True)
class Part:
    """One directory of shards: a split, or both when they read the same folder."""

    name: str
    source: Source
    shards: list[list[int]]  # sample indices (into source) of each shard, in order


def _parts(data: DataSpec) -> tuple[dict[str, str], list[Source], list[str]]:
    if isinstance(data, MixData):
        raise ConfigError(
            "pack packs one dataset; data=mix reads several in proportions at training "
            "time: pack each of its datasets on its own"
        )
    train, val = (
        images_of(open_source(data, split), "pack packs image files", "choose a dataset")
        for split in ("train", "val")
    )
    if _same_samples(train, val):
        return {"train": "all", "val": "all"}, [train], ["all"]
    if train.classes != val.classes:
        raise DataError(
            f"{train.root} and {val.root} have different class folders; "
            "both splits need the same classes"
        )
    return {"train": "train", "val": "val"}, [train, val], ["train", "val"]


def _same_samples(train: Source, val: Source) -> bool:
    """Whether both splits read the same samples (a folder without train_dir/val_dir)."""
    return len(train) == len(val) and all(train.name(i) == val.name(i) for i in range(len(train)))


def source_stats(source: Source) -> list[SampleStat]:
    """Size and version of each sample: the source's own (a folder's ``stat``s), else each
    sample read once and measured, its version a hash of its bytes (an unreadable one
    counts as empty here; packing it meets the bad-file policy)."""
    if isinstance(source, Stats):
        return source.stats()
    stats: list[SampleStat] = []
    for first in range(0, len(source), _MEASURED):
        for blob in source.read(range(first, min(first + _MEASURED, len(source)))):
            if isinstance(blob, DataError):
                stats.append((0, "unreadable"))
            else:
                stats.append((len(blob), hashlib.blake2b(blob.data, digest_size=8).hexdigest()))
    return stats


#: Samples read per call while measuring a source without stats.
_MEASURED = 256


def plan_shards(
    source: Source, shard_bytes: float, seed: int, stats: list[tuple[int, str]]
) -> list[list[int]]:
    """Shuffle the samples (seeded) and cut them into shards of about ``shard_bytes``
    (``stats``: each file's size and version, :func:`source_stats`)."""
    order = np.random.default_rng(seed).permutation(len(source))
    shards: list[list[int]] = [[]]
    filled = 0.0
    for i in order:
        size = stats[i][0]
        if shards[-1] and filled + size > shard_bytes:
            shards.append([])
            filled = 0.0
        shards[-1].append(int(i))
        filled += size + 1536  # tar headers and padding
    return shards if shards[0] else []


def _fingerprint(parts: list[Part], stats: list[list[tuple[int, str]]], spec: PackSpec) -> str:
    digest = hashlib.sha256(json.dumps(asdict(spec) | {"overwrite": None}).encode())
    for part, part_stats in zip(parts, stats, strict=True):
        digest.update(part.name.encode())
        for shard in part.shards:
            for i in shard:
                size, version = part_stats[i]
                line = f"{part.source.name(i)}\0{part.source.labels[i]}\0{size}\0"
                digest.update(f"{line}{version}\n".encode())
            digest.update(b"--\n")
    return digest.hexdigest()


def _planned_fingerprint(storage: Storage, plan: str) -> str | None:
    """The fingerprint of the pack an earlier run planned, None where the plan holds none.
    A plan that cannot be read now (a stalled read, a store that answers with an error) is
    one line, not "another pack": ``pack.overwrite`` would delete a finished pack for it."""
    [blob] = storage.read_many([plan], DEFAULT_READ_TIMEOUT)
    if isinstance(blob, DataError):
        raise ConfigError(f"{blob} (the plan of the pack already there); rerun when it reads")
    try:
        found = json.loads(blob.tobytes())
    except ValueError:
        return None
    return found.get("fingerprint") if isinstance(found, dict) else None


def _prepare_out(storage: Storage, out: str, fingerprint: str, overwrite: bool) -> bool:
    """Make ``out`` (a folder or a bucket prefix) ready; True when resuming an earlier run
    of the same plan."""
    try:
        planned = storage.stat([join(out, PLAN)])[0] is not None
        if not planned and not storage.empty(out):
            raise ConfigError(
                f"out={out} is not empty and holds no pack; choose an empty or new directory"
            )
    except DataError as exc:
        raise ConfigError(f"out={out}: {exc}") from None
    if planned:
        previous = _planned_fingerprint(storage, join(out, PLAN))
        if previous == fingerprint:
            return True
        if not overwrite:
            raise ConfigError(
                f"out={out} holds a pack of other files or settings; use a new directory, "
                "or pack.overwrite=true to redo it"
            )
        log.info("pack.overwrite=true: removing the earlier pack in %s", out)
        storage.remove_all(out)
    write_json(storage, join(out, PLAN), {"fingerprint": fingerprint})
    return False


def _load(source: Source, i: int, data: DataSpec) -> ShardSample | None:
    path = source.name(i)
    blob = source.read([i])[0]
    checked = OnError(data.on_error).attempt(
        path,
        lambda: header_size(blob, path, data.max_pixels),
        lambda _, exc: log.warning("skipping %s", exc),
    )
    if checked is None:
        return None
    assert not isinstance(blob, DataError)  # header_size raised the read error
    key = sample_key(i)  # the sample's identity: its draws follow it into the shards
    data_bytes = blob.tobytes()
    return ShardSample(key, image_ext(path, data_bytes), data_bytes, int(source.labels[i]), path)


def run_pack(cfg: DictConfig) -> dict[str, Any]:
    """Pack ``cfg.data`` into tar shards with indices at ``cfg.out`` (a rerun finishes an
    interrupted pack and skips shards already complete); return the manifest."""
    spec, data, out = _settings(cfg)
    tool = jpegtran() if spec.baseline else None
    if spec.baseline and tool is None:
        log.warning(
            "jpegtran not found: JPEGs are packed as they are; to store them baseline "
            "(decoded faster) %s, or set pack.baseline=false to silence this",
            JPEGTRAN_HINT,
        )
    storing = Storing(tool, spec.max_side, spec.quality)
    storage = storage_for(out)
    splits, sources, names = _parts(data)
    shard_bytes = spec.shard_size_mb * 2**20
    stats = [source_stats(source) for source in sources]
    parts = [
        Part(name, source, plan_shards(source, shard_bytes, spec.seed + k, stats[k]))
        for k, (name, source) in enumerate(zip(names, sources, strict=True))
    ]
    resuming = _prepare_out(storage, out, _fingerprint(parts, stats, spec), spec.overwrite)
    total = sum(len(s) for p in parts for s in p.shards)
    progress = _Progress()
    with tqdm(total=total, desc="pack", unit="img", disable=None) as bar:
        manifest_parts = {
            part.name: _write_part(storage, out, part, data, resuming, progress, bar, storing)
            for part in parts
        }
    manifest = {
        "format": FORMAT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "classes": list(sources[0].classes),
        "splits": splits,
        "parts": manifest_parts,
        "samples": total - len(progress.skipped),
        "skipped": progress.skipped,
        "settings": asdict(spec),
        "stored": progress.tally.record() if storing.changes_files else None,
    }
    write_json(storage, join(out, MANIFEST), manifest)
    shards = sum(len(p.shards) for p in parts)
    if resuming:
        log.info(
            "resumed: %d of %d shards were complete, %d written",
            progress.kept,
            shards,
            progress.written,
        )
    plural = "s" if shards != 1 else ""
    print(f"packed {total - len(progress.skipped)} samples into {shards} shard{plural} in {out}")
    if storing.changes_files:
        print(progress.tally.line(spec.max_side))
    return manifest


def _settings(cfg: DictConfig) -> tuple[PackSpec, DataSpec, str]:
    """The pack and data nodes, checked, and the output directory."""
    spec = to_spec(cfg.pack, PackSpec)
    data = to_spec(cfg.data, DataSpec)
    if isinstance(data, ShardData):
        raise ConfigError("data=shards is already packed: pack an image folder (data=folder)")
    if data.cache:
        raise ConfigError("data.cache does not apply to pack; leave it null")
    out_value = cfg.get("out")
    if not out_value:
        raise ConfigError("out is not set: pass out=/path/to/shards")
    out = str(out_value)
    if is_url(out):
        split_url(out)  # a URL without a bucket is one line
        return spec, data, out.rstrip("/")
    return spec, data, str(Path(out).expanduser())


@dataclass
class _Progress:
    """What a pack run did: shards kept from an earlier run, shards written, files skipped,
    and what storing changed in the images of every shard (kept ones say in their sidecar)."""

    kept: int = 0
    written: int = 0
    skipped: list[list[str]] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)  # what storing changed, in every shard


def _write_part(
    storage: Storage,
    out: str,
    part: Part,
    data: DataSpec,
    resuming: bool,
    progress: _Progress,
    bar: tqdm,
    storing: Storing,
) -> dict[str, Any]:
    """Write the part's shards (keeping the complete ones of an earlier run of the same
    plan; each image stored as ``storing`` says); return its manifest entry."""
    directory = join(out, part.name)
    for stale in storage.remove_stale(directory):
        log.info("removed %s, left by a pack that was killed while writing it", stale)
    numbers = list(range(len(part.shards)))
    kept = complete_shards(storage, directory, numbers, verify=True) if resuming else {}
    entries = []
    for number, shard in enumerate(part.shards):
        if number in kept:
            progress.kept += 1
            progress.tally.merge(kept[number].get("stored"))
        else:
            samples = [_load(part.source, i, data) for i in shard]
            tally = Tally()
            if storing.changes_files:
                samples = storing.samples(samples, tally)
            progress.skipped += [
                [part.source.name(i)] for i, s in zip(shard, samples, strict=True) if not s
            ]
            notes = {"stored": tally.record()} if storing.changes_files else None
            write_shard(storage, directory, number, [s for s in samples if s is not None], notes)
            progress.tally.merge(tally.record())
            progress.written += 1
        bar.update(len(shard))
        name = shard_name(number)
        entries.append(
            {
                "number": number,
                "tar": f"{part.name}/{name}.tar",
                "index": f"{part.name}/{name}.idx",
                "meta": f"{part.name}/{name}.json",
            }
        )
    return {"root": part.source.root, "shards": entries}


def main() -> None:
    """``python -m dali_pipes.pack``."""
    cli.run(run_pack, "pack")
