"""Self-supervised pretraining (SimCLR) on the embedded sample data, then a k-NN accuracy.

The training loop is a user's own: ``for views, labels in loader`` over a dali_pipes loader
with the ``simclr`` preset (any backend: ``backend=torch`` gives the same views), the
labels never used. The network is the small CNN of ``model=small_cnn`` with a projection
head; the loss is SimCLR's NT-Xent. Before and after training, the backbone's features of
the held-out split are classified by a weighted k-NN vote over the training split's
features (both with the evaluation crop), so the gain over the same network untrained is
what the pretraining learnt. The result goes to stdout and, as JSON, to ``--out``.

    python examples/self_supervised.py                        # the documented run
    python examples/self_supervised.py --epochs 5 backend=torch data.train_per_class=40

Arguments after the options are Hydra overrides of ``conf/train.yaml`` (data, augment,
backend, seed); the defaults pick the sample data, its 64-pixel crops and ``augment=simclr``.
See docs/how-to/self-supervised.md.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch import nn

from dali_pipes import compose_config
from dali_pipes.backends import Loader, create_loader
from dali_pipes.config.specs import loader_spec, seed_of
from dali_pipes.train.models import SmallCNN

#: The sample data's images are 112-320 pixels: SimCLR's recipe at 64-pixel crops that
#: keep at least a fifth of the image (the drawn shape is the class), the blur's sigma
#: scaled to the crop (64 / 224 of [0.1, 2]) and the colour jitter at half strength (at
#: full strength, with temperature 0.5, the loss barely moved in 10 epochs here);
#: evaluated on the small preset's centre crops.
DEFAULTS = [
    "data=sample",
    "augment=simclr",
    "augment.train.crop.size=64",
    "augment.train.crop.scale=[0.2,1.0]",
    "augment.train.ops.gaussian_blur.kernel_size=7",
    "augment.train.ops.gaussian_blur.sigma=[0.1,0.6]",
    "augment.train.ops.color_jitter.brightness=0.4",
    "augment.train.ops.color_jitter.contrast=0.4",
    "augment.train.ops.color_jitter.saturation=0.4",
    "augment.train.ops.color_jitter.hue=0.1",
    "augment.val.crop.size=64",
    "augment.val.crop.resize=72",
    "data.batch_size=64",
    "data.drop_last=true",
    "backend.device=cpu",
]


class SimCLR(nn.Module):
    """The small CNN's convolutional features and SimCLR's two-layer projection head."""

    def __init__(self, width: int = 32, dim: int = 64) -> None:
        super().__init__()
        self.backbone = SmallCNN(num_classes=1, width=width).features
        features = 4 * width
        self.head = nn.Sequential(
            nn.Linear(features, features), nn.ReLU(inplace=True), nn.Linear(features, dim)
        )

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The representation k-NN classifies: pooled backbone features."""
        return self.backbone(x).mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def nt_xent(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's loss: each view's other view among the 2N - 1 others, by cosine similarity."""
    z = F.normalize(torch.cat([a, b]), dim=1)
    logits = z @ z.t() / temperature
    logits.fill_diagonal_(float("-inf"))
    n = len(a)
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(logits, targets)


def eval_loader(cfg: DictConfig, split: str) -> Loader:
    """``split``'s images with the evaluation crop, in order: the k-NN's memory bank (train)
    and its queries (val)."""
    spec = loader_spec(cfg, split)
    sampling = replace(spec.sampling, shuffle=False, drop_last=False)
    return create_loader(replace(spec, train=False, sampling=sampling))


@torch.no_grad()
def embed(model: SimCLR, loader: Loader) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sample's normalised features and its label."""
    model.eval()
    feats, labels = [], []
    for images, y in loader:
        feats.append(F.normalize(model.features(images), dim=1))
        labels.append(y)
    return torch.cat(feats), torch.cat(labels)


def knn_accuracy(
    bank: tuple[torch.Tensor, torch.Tensor],
    queries: tuple[torch.Tensor, torch.Tensor],
    classes: int,
    k: int = 20,
    temperature: float = 0.07,
) -> float:
    """Weighted k-NN (as in InstDisc and DINO's evaluation): each query's ``k`` most similar
    bank samples vote for their class with weight exp(similarity / temperature)."""
    (train, train_y), (test, test_y) = bank, queries
    similarity, index = (test @ train.t()).topk(k, dim=1)
    votes = torch.zeros(len(test), classes)
    votes.scatter_add_(1, train_y[index], (similarity / temperature).exp())
    return float((votes.argmax(dim=1) == test_y).float().mean())


def evaluate(model: SimCLR, bank: Loader, queries: Loader) -> float:
    return knn_accuracy(embed(model, bank), embed(model, queries), bank.num_classes)


def pretrain(cfg: DictConfig, epochs: int, lr: float, temperature: float) -> dict[str, Any]:
    """SimCLR on ``cfg``'s training split for ``epochs``; the k-NN accuracy before and after."""
    torch.manual_seed(seed_of(cfg))
    model = SimCLR()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    with (
        create_loader(loader_spec(cfg, "train")) as loader,
        eval_loader(cfg, "train") as bank,
        eval_loader(cfg, "val") as queries,
    ):
        untrained = evaluate(model, bank, queries)
        print(f"k-NN accuracy, untrained: {untrained:.3f}", flush=True)
        start = time.perf_counter()
        losses = []
        for epoch in range(epochs):
            model.train()
            loader.set_epoch(epoch)
            total, steps = 0.0, 0
            for views, _ in loader:  # the labels are not used
                loss = nt_xent(model(views[0]), model(views[1]), temperature)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total, steps = total + float(loss.detach()), steps + 1
            losses.append(total / max(steps, 1))
            print(f"epoch {epoch}: loss {losses[-1]:.3f}", flush=True)
        seconds = time.perf_counter() - start
        trained = evaluate(model, bank, queries)
    print(f"k-NN accuracy, after {epochs} epochs ({seconds:.0f} s): {trained:.3f}")
    return {
        "knn_untrained": untrained,
        "knn_trained": trained,
        "epochs": epochs,
        "losses": losses,
        "train_seconds": seconds,
        "backend": str(cfg.backend.name),
        "train_images": len(loader.dataset),
        "val_images": len(queries.dataset),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--temperature", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=Path("outputs/self_supervised.json"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backend=torch")
    args = parser.parse_args(argv)
    cfg = compose_config([*DEFAULTS, *args.overrides])
    result = pretrain(cfg, args.epochs, args.lr, args.temperature)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
