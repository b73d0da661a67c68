"""A classification training script shaped like torchvision's reference ``train.py``.

``train_one_epoch`` / ``evaluate`` / ``load_data`` / ``main`` as in
``references/classification/train.py`` (its presets: RandomResizedCrop, flip, an optional
TrivialAugmentWide, PILToTensor, ConvertImageDtype, Normalize, RandomErasing; eval: Resize,
CenterCrop, the same conversions), written here for the test. The two lines marked
"The loader lines" are the only ones that differ from the torch ``DataLoader`` version
(tests/e2e/test_reference_script.py swaps them back and runs both).

Usage: python classification_reference.py --data-path ROOT [--epochs N] [--test-only] ...
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.utils.data
import torchvision
from torch import nn
from torchvision.transforms import v2 as T

from dali_pipes import DALIIterator

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def preset_train(crop_size: int, auto_augment: str | None, random_erase: float) -> T.Compose:
    steps = [T.RandomResizedCrop(crop_size, antialias=True), T.RandomHorizontalFlip(0.5)]
    if auto_augment == "ta_wide":
        steps.append(T.TrivialAugmentWide())
    steps += [T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize(MEAN, STD)]
    if random_erase > 0:
        steps.append(T.RandomErasing(p=random_erase))
    return T.Compose(steps)


def preset_eval(crop_size: int, resize_size: int) -> T.Compose:
    return T.Compose(
        [
            T.Resize(resize_size, antialias=True),
            T.CenterCrop(crop_size),
            T.PILToTensor(),
            T.ConvertImageDtype(torch.float),
            T.Normalize(MEAN, STD),
        ]
    )


def accuracy(output: torch.Tensor, target: torch.Tensor, topk: tuple[int, ...]) -> list[float]:
    best = output.topk(max(topk), dim=1).indices
    hits = best.eq(target.view(-1, 1))
    return [100.0 * hits[:, :k].any(dim=1).float().mean().item() for k in topk]


def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args):  # type: ignore[no-untyped-def]
    model.train()
    header = f"Epoch: [{epoch}]"
    for i, (image, target) in enumerate(data_loader):
        start_time = time.time()
        image, target = image.to(device), target.to(device)
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        if i % args.print_freq == 0:
            rate = image.shape[0] / (time.time() - start_time)
            print(f"{header} [{i}/{len(data_loader)}] loss {loss.item():.4f} acc1 {acc1:.1f} "
                  f"acc5 {acc5:.1f} img/s {rate:.1f}")  # fmt: skip


def evaluate(model, criterion, data_loader, device, print_freq=100, log_suffix=""):  # type: ignore[no-untyped-def]
    model.eval()
    header = f"Test: {log_suffix}"
    num_processed_samples, loss_sum, acc1_sum, acc5_sum = 0, 0.0, 0.0, 0.0
    with torch.inference_mode():
        for image, target in data_loader:
            image = image.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(image)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            batch_size = image.shape[0]
            loss_sum += loss.item() * batch_size
            acc1_sum += acc1 * batch_size
            acc5_sum += acc5 * batch_size
            num_processed_samples += batch_size
    if len(data_loader.dataset) != num_processed_samples:
        print(f"It looks like the dataset has {len(data_loader.dataset)} samples, but "
              f"{num_processed_samples} samples were used for the validation")  # fmt: skip
    n = num_processed_samples
    print(f"{header} Acc@1 {acc1_sum / n:.3f} Acc@5 {acc5_sum / n:.3f} loss {loss_sum / n:.5f}")
    return acc1_sum / n


def load_data(traindir, valdir, args):  # type: ignore[no-untyped-def]
    dataset = torchvision.datasets.ImageFolder(
        traindir, preset_train(args.train_crop_size, args.auto_augment, args.random_erase)
    )
    dataset_test = torchvision.datasets.ImageFolder(
        valdir, preset_eval(args.val_crop_size, args.val_resize_size)
    )
    train_sampler = torch.utils.data.RandomSampler(dataset)
    test_sampler = torch.utils.data.SequentialSampler(dataset_test)
    return dataset, dataset_test, train_sampler, test_sampler


def main(args):  # type: ignore[no-untyped-def]
    print(args)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    traindir = valdir = args.data_path
    # The samplers are the DataLoader version's (the loader lines below are the change).
    dataset, dataset_test, train_sampler, test_sampler = load_data(traindir, valdir, args)  # noqa: RUF059
    # The loader lines:
    data_loader = DALIIterator(dataset, batch_size=args.batch_size, train=True)
    data_loader_test = DALIIterator(dataset_test, batch_size=args.batch_size, train=False)

    model = torchvision.models.__dict__[args.model](num_classes=len(dataset.classes))
    model.to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
    if args.test_only:
        evaluate(model, criterion, data_loader_test, device=device)
        return
    print("Start training")
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args)
        lr_scheduler.step()
        evaluate(model, criterion, data_loader_test, device=device)


def get_args_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="PyTorch Classification Training")
    parser.add_argument("--data-path", required=True, type=str)
    parser.add_argument("--model", default="resnet18", type=str)
    parser.add_argument("--device", default="cuda", type=str)
    parser.add_argument("-b", "--batch-size", default=32, type=int)
    parser.add_argument("--epochs", default=90, type=int)
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--label-smoothing", default=0.0, type=float)
    parser.add_argument("--print-freq", default=10, type=int)
    parser.add_argument("--auto-augment", default=None, type=str)
    parser.add_argument("--random-erase", default=0.0, type=float)
    parser.add_argument("--val-resize-size", default=256, type=int)
    parser.add_argument("--val-crop-size", default=224, type=int)
    parser.add_argument("--train-crop-size", default=224, type=int)
    parser.add_argument("--seed", default=0, type=int)
    parser.add_argument("--test-only", action="store_true")
    return parser


if __name__ == "__main__":
    main(get_args_parser().parse_args())
