"""``python -m dali_pipes.pack data=folder data.root=DIR out=SHARDS``: folders -> tar shards.

Reading millions of small files costs a file open and a seek each; a packed dataset is a
few hundred large files read nearly sequentially (:mod:`dali_pipes.data.shards` has the layout).
Samples are shuffled across shards (seeded), each keeps its class index, and shards are
cut at ``pack.shard_size_mb``.

Interrupted packs: every shard is written to a temporary name and renamed, then its index,
then its sidecar, which marks it complete; ``dataset.json`` is written last, so a reader
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
import os
import shutil
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
from dali_pipes.data.files import WriteError, remove_stale
from dali_pipes.data.shards import (
    FORMAT,
    MANIFEST,
    WRITE_HINT,
    ShardSample,
    image_ext,
    sample_key,
    shard_complete,
    shard_name,
    write_json,
    write_shard,
)
from dali_pipes.data.sources import ImageSource, open_source
from dali_pipes.data.specs import TOLERATE, DataSpec, ShardData
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import header_size

log = logging.getLogger("dali_pipes.pack")
PLAN = ".pack-plan.json"


@dataclass(frozen=True)
class Part:
    """One directory of shards: a split, or both when they read the same folder."""

    name: str
    source: ImageSource
    shards: list[list[int]]  # sample indices (into source) of each shard, in order


def _parts(data: DataSpec) -> tuple[dict[str, str], list[ImageSource], list[str]]:
    train, val = open_source(data, "train"), open_source(data, "val")
    assert isinstance(train, ImageSource) and isinstance(val, ImageSource)
    if train.root == val.root:
        return {"train": "all", "val": "all"}, [train], ["all"]
    if train.classes != val.classes:
        raise DataError(
            f"{train.root} and {val.root} have different class folders; "
            "both splits need the same classes"
        )
    return {"train": "train", "val": "val"}, [train, val], ["train", "val"]


def plan_shards(source: ImageSource, shard_bytes: float, seed: int) -> list[list[int]]:
    """Shuffle the samples (seeded) and cut them into shards of about ``shard_bytes``."""
    order = np.random.default_rng(seed).permutation(len(source))
    sizes = [os.path.getsize(source.files[i]) for i in order]
    shards: list[list[int]] = [[]]
    filled = 0.0
    for i, size in zip(order, sizes, strict=True):
        if shards[-1] and filled + size > shard_bytes:
            shards.append([])
            filled = 0.0
        shards[-1].append(int(i))
        filled += size + 1536  # tar headers and padding
    return shards if shards[0] else []


def _fingerprint(parts: list[Part], spec: PackSpec) -> str:
    digest = hashlib.sha256(json.dumps(asdict(spec) | {"overwrite": None}).encode())
    for part in parts:
        digest.update(part.name.encode())
        for shard in part.shards:
            for i in shard:
                st = os.stat(part.source.files[i])
                line = f"{part.source.files[i]}\0{part.source.labels[i]}\0{st.st_size}\0"
                digest.update(f"{line}{st.st_mtime_ns}\n".encode())
            digest.update(b"--\n")
    return digest.hexdigest()


def _prepare_out(out: Path, fingerprint: str, overwrite: bool) -> bool:
    """Make ``out`` ready; True when resuming an earlier run of the same plan."""
    plan_path = out / PLAN
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out={out} is a file; choose a directory for the shards")
    if out.is_dir() and any(out.iterdir()):
        if not plan_path.exists():
            raise ConfigError(
                f"out={out} is not empty and holds no pack; choose an empty or new directory"
            )
        try:
            previous = json.loads(plan_path.read_text()).get("fingerprint")
        except (OSError, ValueError):
            previous = None
        if previous == fingerprint:
            return True
        if not overwrite:
            raise ConfigError(
                f"out={out} holds a pack of other files or settings; use a new directory, "
                "or pack.overwrite=true to redo it"
            )
        log.info("pack.overwrite=true: removing the earlier pack in %s", out)
        for entry in out.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot create out={out} ({exc.strerror or exc}); {WRITE_HINT}") from None
    write_json(plan_path, {"fingerprint": fingerprint})
    return False


def _load(source: ImageSource, i: int, data: DataSpec) -> ShardSample | None:
    path = source.files[i]
    blob = source.read([i])[0]
    try:
        header_size(blob, path, data.max_pixels)
    except DataError as exc:
        if data.on_error not in TOLERATE:
            raise
        log.warning("skipping %s", exc)
        return None
    assert not isinstance(blob, DataError)  # header_size raised the read error
    key = sample_key(i)  # the sample's identity: its draws follow it into the shards
    return ShardSample(key, image_ext(path), blob.tobytes(), int(source.labels[i]), path)


def run_pack(cfg: DictConfig) -> dict[str, Any]:
    """Pack ``cfg.data`` into tar shards with indices at ``cfg.out`` (a rerun finishes an
    interrupted pack and skips shards already complete); return the manifest."""
    spec, data, out = _settings(cfg)
    splits, sources, names = _parts(data)
    shard_bytes = spec.shard_size_mb * 2**20
    parts = [
        Part(name, source, plan_shards(source, shard_bytes, spec.seed + k))
        for k, (name, source) in enumerate(zip(names, sources, strict=True))
    ]
    resuming = _prepare_out(out, _fingerprint(parts, spec), spec.overwrite)
    total = sum(len(s) for p in parts for s in p.shards)
    progress = _Progress()
    with tqdm(total=total, desc="pack", unit="img", disable=None) as bar:
        manifest_parts = {
            part.name: _write_part(out, part, data, resuming, progress, bar) for part in parts
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
    }
    write_json(out / MANIFEST, manifest)
    shards = sum(len(p.shards) for p in parts)
    if resuming:
        log.info(
            "resumed: %d of %d shards were complete, %d written",
            progress.kept,
            shards,
            progress.written,
        )
    print(f"packed {total - len(progress.skipped)} samples into {shards} shards in {out}")
    return manifest


def _settings(cfg: DictConfig) -> tuple[PackSpec, DataSpec, Path]:
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
    return spec, data, Path(str(out_value)).expanduser()


@dataclass
class _Progress:
    """What a pack run did: shards kept from an earlier run, shards written, files skipped."""

    kept: int = 0
    written: int = 0
    skipped: list[list[str]] = field(default_factory=list)


def _write_part(
    out: Path, part: Part, data: DataSpec, resuming: bool, progress: _Progress, bar: tqdm
) -> dict[str, Any]:
    """Write the part's shards (keeping the complete ones of an earlier run of the same
    plan); return its manifest entry."""
    directory = out / part.name
    try:
        directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise WriteError(
            f"cannot create {directory} ({exc.strerror or exc}); {WRITE_HINT}"
        ) from None
    for stale in remove_stale(directory):
        log.info("removed %s, left by a pack that was killed while writing it", stale)
    entries = []
    for number, shard in enumerate(part.shards):
        if resuming and shard_complete(directory, number, verify=True):
            progress.kept += 1
        else:
            samples = [_load(part.source, i, data) for i in shard]
            progress.skipped += [
                [part.source.files[i]] for i, s in zip(shard, samples, strict=True) if not s
            ]
            write_shard(directory, number, [s for s in samples if s is not None])
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
